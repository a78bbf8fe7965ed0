// Package webhookingress receives the Agent-Site service's signed webhooks:
// the HTTP handler that checks, caps, verifies, records and answers, the
// secret lookup for each receiver path, and the relay that turns recorded
// events into workflow signals.
//
// A delivery is answered as soon as it is recorded in the inbox (the store
// table whose primary key is the event id): Temporal being slow or down never
// delays an answer or loses an event; the relay dispatches later and retries
// with backoff. The handler never echoes internals in its answers and never
// logs a secret or a lead's personal data; values the sender chooses are
// clipped in logs, and rejections are logged at a bounded rate.
//
// What an unauthenticated request may cost is bounded before it proves
// anything: the signature header, its timestamp and the receiver are
// checked before the body is read, bodies are capped, the deliveries that
// read and verify at once are bounded, and the store reads a request may
// cause are shared per receiver and cached. The webhook port serves only
// the webhook routes and /healthz; /metrics and /readyz are on the Admin
// handler, for an internal address.
//
// Event ids are unique per deployment, not per receiver. The contract makes
// the body id (or svc-event-id) the deduplication key, and during a secret
// rotation the receiver "accepts and deduplicates events from both
// endpoints", which live on two receiver paths: one event reaching both must
// be recorded once. So the first delivery of an event id on any receiver is
// recorded and every later one, on any receiver, is answered 204. It
// follows that every secret one ingress accepts must belong to the same
// Agent-Site account and environment: a staging endpoint's secret accepted
// here could claim a production event's id first.
//
// A delivery that verifies but whose body is not an envelope siteops can
// read is recorded as it came with the outcome malformed and answered 200:
// the contract has a receiver answer non-2xx only when it wants a retry.
//
// The package leaves out per-client rate limits: the sender's addresses are
// not part of the contract, and a proxy in front sees the clients.
package webhookingress
