// Package workflows holds the deterministic orchestration of siteops:
// Onboarding, LeadSync, EmbedIncident, SecretRotation, EndpointRegistration
// and SecretReconcile (started by its schedule, never by a caller, to
// retire the stored secrets of endpoints that are gone), their
// Input/Result types, the names of their signals, queries and updates, and
// the catalogue (Catalogue) that the worker, the replayer, the starter, the
// relay and the CLI read: type names, functions, derived ID prefixes, ID
// policies and status queries.
//
// Files here contain no I/O: every call to the Agent-Site API or the store
// happens in package activities. Workflows never see API keys, signing
// secrets, lead records or large knowledge texts; they pass ids, hashes and
// counts.
package workflows
