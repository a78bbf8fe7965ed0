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
// ±25 % jitter, capped at 1 h, all divided by Config.TimeScale. At most
// Config.MaxConcurrentDeliveries (64) attempts are in flight at once; a
// burst of events queues for them, its timeout starting only when its
// attempt does. The receiver's address is checked when the endpoint is registered and again
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
// # Rules, written apart from the client
//
// The validation rules are the simulator's own, written from the contract:
// rules.go (knowledge text, event types), origins.go (allowed_origins),
// receivers.go (webhook URLs) and addresses.go (non-public addresses). It
// does not call package agentsite's validators, so that a rule wrong on one
// side shows up in crosscheck_test.go, which runs a table of cases through
// the client's validators and through this handler and wants one outcome,
// the contract's. Where the contract speaks, the rule is the contract's;
// where it is silent, the simulator reads it strictly, so that what passes
// here also passes a service that reads it strictly.
//
//   - allowed_origins: "an exact origin made of scheme, hostname and an
//     optional port", no path, no trailing wildcard. Read literally, that
//     admits an explicit default port (https://x.example:443 has a scheme, a
//     hostname and a port) and any letter case (HTTPS://Gen.Example: schemes
//     and host names are case-insensitive), so both are accepted, and stored
//     as sent: the contract does not say the service rewrites entries.
//     Strict where it is silent: the host is a host name of letters, digits
//     and hyphens (an international name in its xn-- form, as browsers
//     send it), a dotted-quad IPv4 address or a bracketed IPv6 address
//     without a zone; a port is 1 to 65535 without leading zeros; a ':'
//     with no port is refused; two entries naming one origin (compared in
//     the browser's form: lowercase, no default port) are refused as listed
//     twice. 422 invalid_origin names allowed_origins[i] of the first bad
//     entry.
//   - Knowledge text: 5 to 200,000 characters, counted as Unicode code
//     points. A request body that is not UTF-8 is 400 invalid_json rather
//     than decoded with U+FFFD in place of the bad bytes.
//   - Event types: the contract's seven, case-sensitive; domain.activated is
//     refused as retired; at least one, none twice. 422 invalid_events.
//   - Webhook URLs: https (any case); no username, even an empty one; no
//     password; no fragment, even an empty one; no port but 443 (a ':'
//     alone or 0443 is a custom port); a path and a query are allowed.
//     localhost and names under it (RFC 6761) are refused without a lookup;
//     every address an IP literal is, or a name resolves to, must be
//     public; a name that does not resolve, or resolves to nothing, is
//     refused. 422 invalid_url.
//   - Public addresses: "localhost and internal ranges are rejected" is read
//     as "only ordinary global unicast". Refused: every block of the IANA
//     IPv4 and IPv6 special-purpose registries (this network 0/8, private
//     10/8, 172.16/12 and 192.168/16, CGNAT 100.64/10, loopback 127/8,
//     link-local 169.254/16, protocol assignments 192.0.0/24,
//     documentation and benchmarking ranges, AS112 and AMT anycast, the
//     deprecated 6to4 relay; ::, ::1, discard 100::/64, 2001::/23, 2001:db8::/32,
//     3fff::/20, 5f00::/16, unique local fc00::/7, link-local fe80::/10,
//     site-local fec0::/10), multicast (224/4, ff00::/8), reserved 240/4
//     and broadcast, and in IPv6 everything outside 2000::/3. IPv4-mapped
//     (::ffff:0:0/96), NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses
//     are judged by the IPv4 address they carry; an address with a zone is
//     refused. Globally reachable anycast blocks are refused too: they are
//     protocol infrastructure, never a receiver.
//
// Where the client and the simulator differ by design:
//   - The simulator checks a receiver's addresses again when it dials each
//     delivery, so a name rebound to a private address fails the delivery
//     (TestDNSRebindingFailsTheDelivery); a client can only check at
//     registration.
//   - Each side resolves names with its own resolver. In tests they share
//     one; in production siteops and the service resolve from different
//     networks, and for a split-horizon name the service's answer is the
//     one that counts.
//   - The client reports every bad entry at once and names events[i]; the
//     simulator answers the first broken rule and names allowed_origins[i],
//     events or url.
//   - Knowledge text that is not valid UTF-8 is refused by both: by the
//     client before sending, by the simulator with 400 invalid_json, as the
//     body itself is not JSON text.
//   - The simulator knows state the client cannot: an unknown site or
//     endpoint (404), a taken slug (409), a reused idempotency key.
//
// Faults are drawn from a random source seeded by Config.Seed, so that a
// single-threaded sequence of requests meets the same faults on every run;
// under concurrency the order of draws follows the scheduler.
//
// Rate limits: the contract says only that answers telling a client to wait
// carry Retry-After. Besides the random 429 fault (Faults.RateLimitRate),
// the simulator can throttle as a real service does, at a fixed rate:
// Faults.RateLimitRPS is a token bucket per API key (Faults.RateLimitBurst
// tokens, 1 by default, refilled at that many per second, full at start and
// whenever the rate or burst changes). It is checked right after the key is
// recognised, before the scope, the body, the other faults and idempotency,
// so a 429 applies nothing and stores nothing under the idempotency key. Its
// Retry-After is the time until the key's next token in whole seconds,
// rounded up and at least 1. Both can be set at start and changed with PUT
// /_sim/faults. The request log (GET /_sim/requests) marks these answers
// with fault "fixed_rate_limit" and names each key by a fingerprint
// (KeyID), never the key; GET /_sim/stats counts answers by status, by
// fault and 429s by key, and is never trimmed.
package simulator
