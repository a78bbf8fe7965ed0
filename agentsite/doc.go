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
// *BreakerOpenError while the circuit breaker is open.
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
// The API key never appears in an error, a span or a log line: it is only
// ever written to the Authorization header, and spans record no headers.
package agentsite
