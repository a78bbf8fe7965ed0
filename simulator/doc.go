// Package simulator is a faithful, in-memory stand-in for the Agent-Site
// service: the /api/v1 REST API with every rule of the contract enforced, and
// signed webhook deliveries with the sender's timeout, retry and redirect
// rules. siteops' worker, ingress, demo and end-to-end tests run against it,
// and `siteops sim` serves it for anyone's tests.
//
// It is usable in-process (New, then Handler or Serve) and safe for
// concurrent use. State lives in memory and is gone when the process ends.
// Control routes under /_sim/ (admin token) create leads, conversations and
// broadcasts, change faults at run time, and show what the simulator saw.
//
// # Choices where the contract is silent
//
// Status codes and bodies:
//   - Every answer carries X-Request-Id. Every error body is
//     {"error": {"code", "message", "field"}} with field empty when no one
//     field is at fault.
//   - Create site: 201, Location /api/v1/sites/{id}, {"data": site} with
//     status draft. Agent update: 200 {"data": agent}. Knowledge and FAQ
//     create: 201 {"data": {...}} (knowledge status "processing", later
//     "ready"). Publish: 200 {"data": {"id", "status"}}. Endpoint create: 201
//     {"data": {id, url, events, status, secret}}; list: 200 {"data": [...]}
//     with last_delivery {at, event_id, outcome, status_code} and last_error,
//     never the secret; delete: 204 with no body.
//   - GET /api/v1/sites/{site_id} (scope sites:read) answers the site, for
//     "verifying sites".
//   - Malformed JSON, unknown fields, a missing Idempotency-Key, a bad limit
//     or cursor: 400. A well-formed body that breaks a rule: 422 naming the
//     field. Unknown site or endpoint: 404. Taken slug: 409 slug_taken. Body
//     over 4 MiB: 413.
//
// Required fields: site title, slug, type and template; slug is 1 to 63
// lowercase letters, digits and hyphens; persona_mode defaults to assistant
// and languages to ["en"]. Knowledge name and text; FAQ question and
// answer; publish's published. An agent update must set at least one field.
//
// Scopes the contract leaves open: FAQ create needs knowledge:write (FAQs
// ground the agent as knowledge does); publish needs sites:write; listing
// and deleting webhook endpoints need webhooks:write. A key with scope "*"
// has every scope. A missing or unknown bearer is 401; a missing scope is 403
// naming it.
//
// Idempotency: every POST, PATCH and DELETE needs Idempotency-Key. Keys are
// scoped per API key and kept for Config.IdempotencyRetention (24 h by
// default). A retry with the same key, method, path and body (compared after
// JSON compaction) replays the stored status, body and Location with
// Idempotent-Replayed: true; a different request under the same key is 422
// idempotency_key_reused; the same key while the first request is still
// being processed is 409 idempotency_in_flight. Answers of 5xx and 429 are
// not stored, so the retry runs again.
//
// Leads are listed oldest first. limit defaults to 50 and must be 1 to 200.
// A cursor is an opaque token, authenticated with a per-simulator key and
// bound to one site's collection; another site's cursor or a forged one is
// 400 invalid_cursor. The token is standard base64 and so contains + / =,
// which a client must URL-encode. Leads are only appended, so a cursor stays
// valid as the collection grows.
//
// Deliveries: per event and subscribed, enabled endpoint, a POST with the
// contract's headers and envelope, signed with the endpoint's secret at each
// attempt. 10 s timeout; only 2xx is success; redirects are failures and are
// not followed; up to 8 attempts; the n-th retry waits 2 s × 2^(n-1) with
// ±25 % jitter, capped at 1 h, all divided by Config.TimeScale. The
// receiver's address is checked when the endpoint is registered and again
// when each connection is dialled, so a name that later resolves to a
// private address fails the delivery. Config.AllowLoopbackReceivers (test
// mode) also allows http and any port on 127.0.0.0/8, ::1 and localhost,
// and nothing else private. Deleting an endpoint stops its pending
// deliveries. Event data: site.published and site.unpublished carry
// {site_id, status}; lead.created {site_id, lead_id}; knowledge.ready
// {site_id, knowledge_id}; conversation.started {site_id, conversation_id};
// conversation.message.created {site_id, conversation_id, message_id};
// broadcast.sent {site_id, broadcast_id}. domain.activated is never emitted.
//
// Faults are drawn from a random source seeded by Config.Seed, so that a
// single-threaded sequence of requests meets the same faults on every run;
// under concurrency the order of draws follows the scheduler.
package simulator
