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
// The MAC covers t exactly as the header wrote it. t must be the decimal
// Unix time without leading zeros (another spelling of the same number is a
// malformed header), and Check looks at the header and its timestamp alone,
// so that a receiver can refuse a delivery before it reads the body.
// DecodeEnvelope parses a verified body strictly: duplicate keys and keys
// that differ only in case are refused, where encoding/json would resolve
// them case-insensitively, last one winning.
//
// Verification is on the ingress's path for every delivery, so it
// allocates as little as it can: once its pooled states are warm, Verify
// allocates nothing, and Check then Header.Match allocate once, for the
// Header's slice of v1 values. The keyed HMAC-SHA256 states are pooled
// per secret in a bounded table (macPools), the timestamp text is written
// into the MAC from a buffer of the pooled state, and v1 is decoded
// straight from the header text.
//
// The package knows nothing of HTTP, stores or clocks: callers pass the raw
// body, the header value, the candidate secrets and the current time. It
// deliberately leaves out deduplication and routing; those belong to the
// ingress.
package webhook
