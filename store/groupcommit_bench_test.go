package store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// BenchmarkInsertEvents measures what one group commit's batch costs per
// event on PostgreSQL, for each way of writing it (store.InsertStrategies)
// at each batch size, one batch at a time: this process's CPU, the CPU of
// the strategy's PostgreSQL backends (each strategy has a store of its
// own whose sessions carry an application_name of their own, so that
// other sessions on the server do not count) and the WAL the server wrote
// meanwhile (pg_current_wal_lsn; other sessions writing at the same time
// add to it). The strategies take turns, 20 rounds of b.N/20 events each,
// so that a load that changes weighs on all alike. b.N is the number of
// events per strategy; ns/op is the mean over all strategies.
//
//	go test -run '^$' -bench BenchmarkInsertEvents -benchtime 20000x ./store/
func BenchmarkInsertEvents(b *testing.B) {
	hows := []string{"values", "values-plain", "unnest", "unnest-plain", "copy"}
	if h := os.Getenv("SITEOPS_BENCH_INSERT"); h != "" {
		hows = strings.Split(h, ",")
	}
	for _, size := range []int{1, 8, 16, 32, 200} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			type runner struct {
				st     *store.Store
				pg     measuredPG
				insert func(*store.Store, context.Context, []store.InboxEvent) (map[string]bool, error)
				used   pgUsage
				wall   time.Duration
				n      int
			}
			rs := make([]*runner, len(hows))
			run := fmt.Sprintf("%d", time.Now().UnixNano())
			next := 0
			batch := func(n int) []store.InboxEvent {
				evs := make([]store.InboxEvent, n)
				for i := range evs {
					id := fmt.Sprintf("evt_%s_%08d", run, next)
					next++
					evs[i] = store.InboxEvent{EventID: id, EventType: "lead.created", Lane: store.LaneBulk, EndpointID: "env", ReceivedAt: time.Now(),
						Body: []byte(`{"id":"` + id + `","type":"lead.created","created_at":"2026-11-21T09:00:00.000Z","data":{"site_id":"site_` + id[len(id)-2:] + `","lead_id":"lead_1"}}`)}
				}
				return evs
			}
			for i, how := range hows {
				insert, ok := store.InsertStrategies[how]
				if !ok {
					b.Fatalf("no insert strategy %q", how)
				}
				st, pg := openMeasured(b)
				rs[i] = &runner{st: st, pg: pg, insert: insert}
				// One batch first, so that the statement is prepared (and
				// COPY's table made) before the count starts.
				if _, err := insert(st, b.Context(), batch(size)); err != nil {
					b.Fatal(err)
				}
			}
			const rounds = 20
			per := max(b.N/rounds, size)
			b.ResetTimer()
			for round := range rounds {
				for k := range rs {
					r := rs[(k+round)%len(rs)]
					before, start := r.pg.read(b), time.Now()
					for i := 0; i < per; i += size {
						n := min(size, per-i)
						got, err := r.insert(r.st, b.Context(), batch(n))
						if err != nil {
							b.Fatal(err)
						}
						if len(got) != n {
							b.Fatalf("%d of %d events inserted, want all", len(got), n)
						}
					}
					r.wall += time.Since(start)
					r.used = r.used.add(r.pg.read(b).sub(before))
					r.n += per
				}
			}
			b.StopTimer()
			for i, r := range rs {
				r.used.report(b, hows[i], r.n, r.wall)
			}
		})
	}
}

// measuredPG reads what a store's sessions cost its PostgreSQL server.
type measuredPG struct {
	admin *sql.DB
	app   string // the store's application_name
}

// openMeasured opens a PostgreSQL store whose sessions carry an
// application_name of their own, and a session to measure them from.
func openMeasured(b *testing.B) (*store.Store, measuredPG) {
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
	st, err := store.Open(b.Context(), u.String(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	admin, err := sql.Open("pgx", storetest.PostgresURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = admin.Close() })
	return st, measuredPG{admin: admin, app: app}
}

// pgUsage is the CPU time of this process and of a store's backends, and
// the server's WAL position.
type pgUsage struct {
	cpu, sys time.Duration // sys: the kernel's part of cpu
	self     time.Duration
	wal      int64
	pids     map[int][2]time.Duration
}

func (m measuredPG) read(b *testing.B) pgUsage {
	b.Helper()
	u := pgUsage{pids: map[int][2]time.Duration{}}
	rows, err := m.admin.QueryContext(b.Context(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, m.app)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			b.Fatal(err)
		}
		cpu, sys := procCPU(pid)
		u.pids[pid] = [2]time.Duration{cpu, sys}
		u.cpu, u.sys = u.cpu+cpu, u.sys+sys
	}
	_ = rows.Close()
	if err := m.admin.QueryRowContext(b.Context(), `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`).Scan(&u.wal); err != nil {
		b.Fatal(err)
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	u.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return u
}

// sub is u since before: backends that were not there before count from
// zero.
func (u pgUsage) sub(before pgUsage) pgUsage {
	d := pgUsage{self: u.self - before.self, wal: u.wal - before.wal}
	for pid, t := range u.pids {
		d.cpu += t[0] - before.pids[pid][0]
		d.sys += t[1] - before.pids[pid][1]
	}
	return d
}

func (u pgUsage) add(v pgUsage) pgUsage {
	return pgUsage{cpu: u.cpu + v.cpu, sys: u.sys + v.sys, self: u.self + v.self, wal: u.wal + v.wal}
}

// report reports the costs per event of n, as NAME-us/event (wall time),
// NAME-self-cpu-us/event, NAME-pg-cpu-us/event (NAME-pg-sys-us/event of
// it the kernel's) and NAME-wal-B/event.
func (u pgUsage) report(b *testing.B, name string, n int, wall time.Duration) {
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 / float64(n) }
	b.ReportMetric(per(wall), name+"-us/event")
	b.ReportMetric(per(u.self), name+"-self-cpu-us/event")
	b.ReportMetric(per(u.cpu), name+"-pg-cpu-us/event")
	b.ReportMetric(per(u.sys), name+"-pg-sys-us/event")
	b.ReportMetric(float64(u.wal)/float64(n), name+"-wal-B/event")
}

// procCPU is the CPU time of a process, and the system's part of it, from
// /proc/PID/stat (clock ticks of 10 ms); zero once it has exited.
func procCPU(pid int) (cpu, sys time.Duration) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond, time.Duration(stime) * 10 * time.Millisecond
}
