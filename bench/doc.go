// Package bench holds the load generators and benchmark harnesses whose
// numbers bench/README.md records. They run against real parts on this
// machine only (loopback): the ingress handler over HTTP, SQLite and the
// PostgreSQL server, and a Temporal dev server started by TestMain.
package bench
