// Package ingress receives the Agent-Site service's signed webhooks: the
// HTTP handler that checks, caps, verifies, records and answers, the
// secret lookup for each receiver path, the record of refused deliveries,
// the connection cap of the public port, and the check of a captured
// delivery as the handler verifies it (siteops signature verify). A
// delivery's way through siteops is ingress → inbox (the store) → relay
// (package relay) → workflow; the ingress process runs the relay beside
// the handler (Server), and on-call's tools over what was recorded are
// package inbox.
//
// A delivery is answered as soon as it is recorded in the inbox (the store
// table whose primary key is the event id): Temporal being slow or down never
// delays an answer or loses an event; the relay dispatches later and retries
// with backoff. The handler never echoes internals in its answers and never
// logs a secret or a lead's personal data; values the sender chooses are
// clipped in logs, and rejections are logged at a bounded rate.
//
// What an unauthenticated request may cost is bounded before it proves
// anything: the signature header and its timestamp are checked before the
// body is read; only the delivery routes take a body, and every answer
// given without reading one closes its connection (net/http would
// otherwise wait for the body to drain it); connections are capped, the
// answered, idle and slowest closed first to make room, and then the one
// busy longest, past a floor (conns.go); a body is read as its bytes
// arrive, holding no slot, its memory counted by the bytes that came
// (body.go); only a body read whole takes a slot to verify and record; the
// receivers and their secrets are read as one list, never per request
// (secrets.go); every metric label's values are bounded; and the log line
// of a refusal that a limit made names the limit and its setting
// (limits.go). The webhook port serves only the webhook routes and
// /healthz; /metrics and /readyz are on the Admin handler, for an internal
// address.
//
// A receiver that does not exist, and one whose stored secrets do not
// decrypt, are answered as a signature that no secret verifies (401), after
// the body, as a forged delivery to a receiver that is fine is: the answers
// do not list the receiver names. The sender retries a 401 as any non-2xx,
// so a delivery signed with a damaged secret succeeds once it is fixed; the
// logs and the metrics keep the real reason (unknown_receiver,
// secret_unreadable).
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
// The package leaves out per-client limits: the sender's addresses are not
// part of the contract, and the TLS terminator in front (the webhook URL is
// HTTPS on 443; the ingress serves plain HTTP) is what sees the clients.
package ingress
