// Package webhook is the byte-level core of Agent-Site webhook deliveries:
// the stable event envelope, the event type constants, and Sign and Verify
// for the svc-signature header.
//
// The signed value is the timestamp text from t, a period, and the exact raw
// request body. The MAC is HMAC-SHA256 keyed with the endpoint's signing
// secret, taken as the bytes of the whole secret string including its whsec_
// prefix (the contract says "keyed with the endpoint's signing secret" and
// describes no decoding step), written as 64 lowercase hex characters in v1.
//
// The package knows nothing of HTTP, stores or clocks: callers pass the raw
// body, the header value, the candidate secrets and the current time. It
// deliberately leaves out deduplication and routing; those belong to the
// ingress.
package webhook
