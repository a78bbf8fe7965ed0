// Package webhookingress receives the Agent-Site service's signed webhooks:
// the HTTP handler that caps, verifies, records and answers, the secret
// lookup for each receiver path, and the relay that turns recorded events
// into workflow signals.
//
// A delivery is answered as soon as it is recorded in the inbox (the store
// table whose primary key is the event id): Temporal being slow or down never
// delays an answer or loses an event; the relay dispatches later and retries
// with backoff. The handler never echoes internals in its answers and never
// logs a secret or a lead's personal data.
package webhookingress
