// Package agentsite is a typed client for the Agent-Site REST API at
// {base_url}/api/v1: sites, the agent, knowledge sources, FAQs, publishing,
// leads and webhook endpoints.
//
// Every request carries the bearer key; every mutating method takes the
// idempotency key as a required argument and refuses an empty one before
// anything is sent. Callers choose keys: a retry of the same logical
// operation reuses its key, a new operation uses a new one. The client never
// retries by itself; retries belong to the caller (Temporal activities in
// siteops), which classifies the typed errors returned here: *APIError for
// any non-2xx answer, *ValidationError for input refused before sending, and
// *BreakerOpenError while the circuit breaker is open, and *ThrottledError
// when the shared rate Limiter (WithLimiter) would make a call wait beyond
// its deadline. The last two are returned without sending anything.
//
// Where the contract is silent the client assumes, and the simulator
// implements:
//   - single-resource answers wrap the resource in "data", also for the agent
//     update, knowledge and FAQ create and publish, whose bodies the contract
//     does not show; an empty success body is accepted;
//   - the webhook endpoint list is GET /webhook-endpoints answering
//     {"data": [endpoint...]}, and the one-time signing secret of a new
//     endpoint is data.secret;
//   - the request id of an answer is in the X-Request-Id header (Request-Id is
//     read too);
//   - error bodies are {"error": {"code", "message", "field"}}; other JSON
//     bodies are kept raw;
//   - an empty next_cursor ends lead iteration like null does;
//   - a webhook URL with an explicit port other than 443 has a custom port.
//
// # Allowed origins
//
// The contract: each allowed_origins entry "is an exact origin made of
// scheme, hostname and an optional port", with no path and no trailing
// wildcard. Read literally, https://x.example:443 is made of a scheme, a
// hostname and a port, and HTTPS://Gen.Example of a scheme and a hostname,
// both case-insensitive (RFC 3986 §3.1 and §3.2.2). So ValidateOrigin
// accepts both, and so do UpdateAgent and siteops' --dry-run, which use it:
// refusing them made the client stricter than the contract.
//
// They are spellings of one origin, though. A browser's Origin header, which
// the embed check compares with the list, always carries the canonical
// form: scheme and host in lowercase, the default port left out (RFC 6454
// §6.2); CanonicalOrigin returns it, and two entries with one canonical form
// are refused as listed twice. The contract does not say whether the
// service compares entries as origins or as strings. If it compares
// strings, only the canonical form ever matches, so that is the form to
// send: UpdateAgent sends every entry in its canonical form (the same for
// the same input, so a retry sends the same body).
//
// Where the contract is silent the client is strict, as the simulator is:
// the host is a host name of letters, digits and hyphens (an international
// name in its xn-- form, as browsers send it), a dotted-quad IPv4 address or
// a bracketed IPv6 address without a zone; a port is 1 to 65535 without
// leading zeros; a ':' with no port is refused.
//
// These rules, the knowledge text bounds, the event types and the webhook
// URL rules (IsPublicAddr: every IANA special-purpose block, multicast and
// reserved ranges, IPv6 outside 2000::/3, embedded IPv4 judged by itself)
// are written again, separately, in package simulator; its cross-check test
// holds the two to the same outcome on a table of cases.
//
// The API key never appears in an error, a span or a log line: it is only
// ever written to the Authorization header, and spans record no headers.
package agentsite
