// Package workflows holds the deterministic orchestration of siteops:
// Onboarding, LeadSync and EmbedIncident (SecretRotation follows), their
// Input/Result types, the names of their signals, queries and updates, and
// the helpers that derive workflow IDs and idempotency keys, shared by the
// starter and the relay.
//
// Files here contain no I/O: every call to the Agent-Site API or the store
// happens in package activities. Workflows never see API keys, signing
// secrets, lead records or large knowledge texts; they pass ids, hashes and
// counts.
package workflows
