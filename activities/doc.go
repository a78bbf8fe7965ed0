// Package activities holds every Temporal activity of siteops as a method of
// Activities, whose dependencies (the Agent-Site client, the store, a clock)
// are injected once at worker start.
//
// Each mutating activity receives its idempotency key in its input; the
// workflow derives it from its ID and the logical step, so that a retried
// attempt sends the same key and a new operation a new one. Nothing here
// makes a key.
//
// Errors are classified in one place, classify: the activity returns either
// a retryable error (with NextRetryDelay when the service said Retry-After)
// or a non-retryable *temporal.ApplicationError whose type is one of the
// ErrType constants. Secrets, API keys and lead records never leave an
// activity: results carry ids, counts and fingerprints only.
package activities
