// Package e2e holds the end-to-end tests of siteops: a real Temporal dev
// server (the pinned CLI, started by TestMain), the simulator over HTTP, the
// real worker (in-process through package wiring as `siteops worker` runs
// it, see package testenv here, or the siteops binary where a test
// kills it), and real SQLite and PostgreSQL stores.
package e2e
