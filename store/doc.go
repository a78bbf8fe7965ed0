// Package store keeps what must not enter workflow history: lead records,
// encrypted webhook signing secrets, large knowledge texts by content hash,
// and which onboarding workflow owns a site. It runs on SQLite (the embedded
// default, pure Go) or PostgreSQL through database/sql, and migrates its
// schema with goose at Open.
//
// It deliberately holds no API keys and no business rules: activities decide
// what to write, the store makes each write atomic and idempotent.
package store
