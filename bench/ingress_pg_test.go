package bench

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// pgSessions measures what the sessions of one store cost the PostgreSQL
// server: the store's connections carry an application_name of their own,
// so that the backends of other sessions on the server (other tests and
// benchmarks on a shared machine) do not count, as they would in
// postgresCPU.
type pgSessions struct {
	admin *sql.DB
	app   string
}

// openPostgres opens a migrated store on a fresh schema of the test
// server, with o and TestKey, whose sessions carry an application_name of
// their own, and the pgSessions that measures them.
func openPostgres(b *testing.B, o store.Options) (*store.Store, pgSessions) {
	b.Helper()
	u, err := url.Parse(storetest.PostgresSchemaURL(b))
	if err != nil {
		b.Fatal(err)
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	app := "siteops-bench-" + hex.EncodeToString(r[:])
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	o.SecretKey = storetest.TestKey
	st, err := store.Open(b.Context(), u.String(), o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	admin, err := sql.Open("pgx", storetest.PostgresURL())
	if err != nil {
		b.Fatal(err)
	}
	admin.SetMaxOpenConns(1)
	b.Cleanup(func() { _ = admin.Close() })
	return st, pgSessions{admin: admin, app: app}
}

// pgUse is a reading of pgSessions: the CPU time of the store's backends
// and of the server's background processes (WAL writer, background
// writer, checkpointer, autovacuum workers: shared with every other
// session), the WAL position, and this process's CPU time.
type pgUse struct {
	backends, background, self time.Duration
	wal                        int64
	pids                       map[int]time.Duration
	bg                         map[int]time.Duration
}

func (p pgSessions) read(b *testing.B) pgUse {
	b.Helper()
	u := pgUse{pids: map[int]time.Duration{}, bg: map[int]time.Duration{}}
	rows, err := p.admin.QueryContext(b.Context(), `SELECT pid, application_name = $1 FROM pg_stat_activity
		WHERE application_name = $1 OR backend_type IN ('walwriter', 'background writer', 'checkpointer', 'autovacuum worker')`, p.app)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var pid int
		var mine bool
		if err := rows.Scan(&pid, &mine); err != nil {
			b.Fatal(err)
		}
		cpu := pidCPU(pid)
		if mine {
			u.pids[pid], u.backends = cpu, u.backends+cpu
		} else {
			u.bg[pid], u.background = cpu, u.background+cpu
		}
	}
	_ = rows.Close()
	if err := p.admin.QueryRowContext(b.Context(), `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`).Scan(&u.wal); err != nil {
		b.Fatal(err)
	}
	u.self = selfCPU()
	return u
}

// sub is u since before. A backend that was not there before counts from
// zero; one that has gone since is left out (the store keeps its idle
// connections, so none goes while the ingress runs; a relay that stops
// closes those whose queries it cancels).
func (u pgUse) sub(before pgUse) pgUse {
	d := pgUse{self: u.self - before.self, wal: u.wal - before.wal}
	for pid, t := range u.pids {
		d.backends += t - before.pids[pid]
	}
	for pid, t := range u.bg {
		d.background += t - before.bg[pid]
	}
	return d
}

// pidCPU is the user and system CPU time of a process from /proc/PID/stat
// (clock ticks of 10 ms); zero once it has exited.
func pidCPU(pid int) time.Duration {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields count from the
	// last ')'.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// selfCPU is this process's user and system CPU time, to the microsecond.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
