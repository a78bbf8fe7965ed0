package ingress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/telemetry/telemetrytest"
)

// countingRefusals counts the writes of the record and their rows, and
// fails the next writes while fail is above 0.
type countingRefusals struct {
	*store.Store
	writes  atomic.Int64
	maxRows atomic.Int64
	fail    atomic.Int64
}

func (c *countingRefusals) RecordRefusals(ctx context.Context, rows []store.RefusedDelivery) error {
	c.writes.Add(1)
	storeMax(&c.maxRows, int64(len(rows)))
	if c.fail.Add(-1) >= 0 {
		return errors.New("connection refused")
	}
	return c.Store.RecordRefusals(ctx, rows)
}

// storeMax raises a to v when v is larger.
func storeMax(a *atomic.Int64, v int64) {
	for {
		m := a.Load()
		if v <= m || a.CompareAndSwap(m, v) {
			return
		}
	}
}

// recordInbox fails every record of an event, as a store that fails
// between the verification and the record does, and reads the rest from
// the store.
type recordInbox struct{ *store.Store }

func (recordInbox) RecordEvent(context.Context, store.InboxEvent) (bool, error) {
	return false, errors.New("connection refused")
}

// TestRefusalsAreRecorded sends a delivery refused for each kind of
// reason the record is for and checks its rows after one write: the
// receiver as the ingress names it (the default one empty, a listed name,
// a made-up name, a name out of form quoted), the reason and the status
// answered, the count, and the event id and type only for the delivery
// whose signature verified (the store failed to record it); never the
// sender's unsigned headers, the body or a secret. The metric counts by
// receiver, every unlisted name under one label.
func TestRefusalsAreRecorded(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	if err := st.PutSecret(t.Context(), "we_2", "v2", agentsite.NewSigningSecret(storedSecret)); err != nil {
		t.Fatal(err)
	}
	rec := &countingRefusals{Store: st}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	h := NewHandler(Options{Inbox: recordInbox{st}, Secrets: st, EnvSecrets: []string{envSecret}, Now: func() time.Time { return now },
		Metrics: m, Registry: reg, Refused: RefusedOptions{Store: rec}})
	f := &fixture{h: h, st: st}
	unsigned := map[string]string{"svc-event-id": "evt_unsigned_header", "svc-event-type": "unsigned.type"}
	sends := []struct {
		d    delivery
		want int
	}{
		{delivery{path: "/webhooks/v2", secret: "whsec_forged_by_someone", id: "evt_forged", headers: unsigned}, 401},
		{delivery{path: "/webhooks/v2", secret: "whsec_forged_by_someone", id: "evt_forged2"}, 401},
		{delivery{path: "/webhooks/nobody", secret: "whsec_forged_by_someone", id: "evt_nobody"}, 401},
		{delivery{path: "/webhooks/-out%0Aof%1B[31mform", headers: unsigned}, 401},
		{delivery{at: now.Add(-time.Hour), headers: unsigned}, 401},
		{delivery{sigOver: "t=1,v1=" + envSecret, headers: unsigned}, 400},
		// Verified with SITEOPS_WEBHOOK_SECRETS, then the store fails.
		{delivery{id: "evt_verified_lost", typ: "knowledge.ready", headers: map[string]string{"svc-event-id": "evt_other_header"}}, 503},
	}
	for i, s := range sends {
		if got := f.send(t, s.d).Code; got != s.want {
			t.Fatalf("delivery %d = %d, want %d", i, got, s.want)
		}
	}
	if n := rec.writes.Load(); n != 0 {
		t.Fatalf("refusing %d deliveries wrote the record %d times on their way; want none (the loop writes it)", len(sends), n)
	}
	h.flushRefusals(t.Context())
	if n := rec.writes.Load(); n != 1 {
		t.Fatalf("one flush wrote %d times, want 1", n)
	}
	rows, err := st.RefusedDeliveries(t.Context(), store.RefusedFilter{})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		receiver, reason string
		status           int
		count            int64
		id, typ          string
	}
	var got []row
	for _, r := range rows {
		got = append(got, row{r.Receiver, r.Reason, r.Status, r.Count, r.EventID, r.EventType})
		if !r.Minute.Equal(now) || !r.FirstAt.Equal(now) || !r.LastAt.Equal(now) {
			t.Errorf("row %v: minute %s, first %s, last %s; want all %s", r, r.Minute, r.FirstAt, r.LastAt, now)
		}
	}
	slices.SortFunc(got, func(a, b row) int {
		return cmp.Or(strings.Compare(a.receiver, b.receiver), strings.Compare(a.reason, b.reason))
	})
	want := []row{
		{"", "malformed_signature_header", 400, 1, "", ""},
		{"", "store_unavailable", 503, 1, "evt_verified_lost", "knowledge.ready"},
		{"", "timestamp_outside_window", 401, 1, "", ""},
		{`"-out?of?[31mform"`, "unknown_receiver", 401, 1, "", ""},
		{"nobody", "unknown_receiver", 401, 1, "", ""},
		{"v2", "invalid_signature", 401, 2, "", ""},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the record:\n got %v\nwant %v", got, want)
	}
	text := fmt.Sprintf("%+v", rows)
	for _, never := range []string{envSecret, storedSecret, "whsec_forged", "evt_unsigned_header", "unsigned.type", "evt_other_header", "evt_forged", "site_1", "lead_1", "\x1b"} {
		if strings.Contains(text, never) {
			t.Errorf("the record holds %q: %s", never, text)
		}
	}
	for _, c := range []struct {
		receiver, reason string
		want             float64
	}{
		{"v2", "invalid_signature", 2},
		{UnknownReceiverLabel, "unknown_receiver", 2},
		{"default", "timestamp_outside_window", 1},
		{"default", "store_unavailable", 1},
	} {
		if got := telemetrytest.Value(t, reg, "siteops_webhook_refusals_total", "receiver", c.receiver, "reason", c.reason); got != c.want {
			t.Errorf("siteops_webhook_refusals_total{receiver=%q,reason=%q} = %v, want %v", c.receiver, c.reason, got, c.want)
		}
	}
}

// TestRefusalFloodWritesAtMostTheCap floods a handler that keeps the
// record, its loop writing every 20 ms, with forged deliveries from 25
// senders — to a receiver that exists and to a new made-up name each —
// and checks what they cost the store: at most one write per period, each
// of at most refusedKeys rows plus one per reason, made-up names kept up
// to RefusedNamesPerMinute a minute and the rest counted under OtherReceivers,
// every refusal counted once in the record, and the memory of the counts
// bounded meanwhile.
func TestRefusalFloodWritesAtMostTheCap(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	if err := st.PutSecret(t.Context(), "we_2", "v2", agentsite.NewSigningSecret(storedSecret)); err != nil {
		t.Fatal(err)
	}
	rec := &countingRefusals{Store: st}
	const flush = 20 * time.Millisecond
	h := NewHandler(Options{Inbox: st, Secrets: st, Now: func() time.Time { return now }, Refused: RefusedOptions{Store: rec, FlushEvery: flush}})
	f := &fixture{h: h, st: st}
	ctx, cancel := context.WithCancel(t.Context())
	var loop sync.WaitGroup
	loop.Go(func() { h.recordRefusals(ctx) })
	const forged, senders = 2000, 25
	var wg sync.WaitGroup
	var held atomic.Int64
	start := time.Now()
	for w := range senders {
		wg.Go(func() {
			for i := w; i < forged; i += senders {
				path := "/webhooks/v2"
				if i%2 == 1 {
					path = fmt.Sprintf("/webhooks/r%x", rand.Uint64())
				}
				if code := f.send(t, delivery{path: path, secret: "whsec_forged", id: "evt_x"}).Code; code != http.StatusUnauthorized {
					t.Errorf("forged delivery to %s = %d, want 401", path, code)
					return
				}
				h.refused.mu.Lock()
				n := int64(len(h.refused.pending))
				h.refused.mu.Unlock()
				storeMax(&held, n)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	cancel()
	loop.Wait()
	// One write per period at most, and the last one at the end.
	limit := int64(took/flush) + 2
	writes, rows := rec.writes.Load(), rec.maxRows.Load()
	t.Logf("%d forged deliveries in %s: %d writes of the record, at most %d rows each; at most %d rows held", forged, took.Round(time.Millisecond), writes, rows, held.Load())
	if writes > limit {
		t.Errorf("%d forged deliveries in %s made %d writes; want at most %d (one per %s)", forged, took.Round(time.Millisecond), writes, limit, flush)
	}
	// The made-up names' rows, one per reason for the rest, and the one
	// listed receiver's row.
	if bound := int64(refusedKeys + len(refusalReasons) + 1); rows > bound || held.Load() > bound {
		t.Errorf("a write carried %d rows and %d were held; want at most %d", rows, held.Load(), bound)
	}
	got, err := st.RefusedDeliveries(t.Context(), store.RefusedFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	names := 0
	for _, r := range got {
		total += r.Count
		switch r.Receiver {
		case "v2":
			if r.Count != forged/2 || r.Reason != "invalid_signature" {
				t.Errorf("the receiver that exists: %+v; want %d invalid_signature", r, forged/2)
			}
		case OtherReceivers:
		default:
			names++
		}
	}
	if total != forged {
		t.Errorf("the record counts %d refusals, want %d", total, forged)
	}
	if names != RefusedNamesPerMinute {
		t.Errorf("the record keeps %d made-up names in one minute; want %d, the rest under %s", names, RefusedNamesPerMinute, OtherReceivers)
	}
}

// TestMadeUpNamesCannotPushOutTheRealReceivers floods a handler, on both
// dialects, with deliveries to made-up receiver names refused for three
// reasons each, more rows between two writes than refusedKeys and more
// rows in all than the record's MaxRows, and checks that the real
// receivers' refusals (a stored receiver's and the default one's) keep
// rows of their own, under their names, through the writes and prunes.
func TestMadeUpNamesCannotPushOutTheRealReceivers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		if err := st.PutSecret(ctx, "we_2", "v2", agentsite.NewSigningSecret(storedSecret)); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		clock := now
		at := func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return clock
		}
		const maxRows = 40
		h := NewHandler(Options{Inbox: st, Secrets: st, EnvSecrets: []string{envSecret}, Now: at, Refused: RefusedOptions{Store: st, MaxRows: maxRows}})
		f := &fixture{h: h, st: st}
		flood := func() {
			for i := range 2 * RefusedNamesPerMinute {
				path := fmt.Sprintf("/webhooks/made-up-%d-%d", at().Unix(), i)
				for _, d := range []delivery{
					{path: path, secret: "whsec_forged", at: at()},
					{path: path, at: at().Add(-time.Hour)},
					{path: path, sigOver: "garbage", at: at()},
				} {
					if code := f.send(t, d).Code; code < 400 {
						t.Fatalf("a forged delivery to %s = %d; want it refused", path, code)
					}
				}
			}
		}
		real := func() {
			if code := f.send(t, delivery{path: "/webhooks/v2", secret: "whsec_forged", at: at()}).Code; code != http.StatusUnauthorized {
				t.Fatalf("a forged delivery to v2 = %d, want 401", code)
			}
			if code := f.send(t, delivery{at: at().Add(-time.Hour)}).Code; code != http.StatusUnauthorized {
				t.Fatalf("a stale delivery to the default receiver = %d, want 401", code)
			}
		}
		// Two minutes of made-up names before one write, the real
		// receivers' refusals last.
		flood()
		mu.Lock()
		clock = clock.Add(time.Minute)
		mu.Unlock()
		flood()
		real()
		h.flushRefusals(ctx)
		realMinute := at()
		// Ten more minutes of them, written and pruned as the loop does.
		for range 10 {
			mu.Lock()
			clock = clock.Add(time.Minute)
			mu.Unlock()
			flood()
			h.flushRefusals(ctx)
			h.pruneRefusals(ctx)
		}
		rows, err := st.RefusedDeliveries(ctx, store.RefusedFilter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) > maxRows {
			t.Errorf("the record holds %d rows; want at most %d", len(rows), maxRows)
		}
		var kept []string
		for _, r := range rows {
			if r.Minute.Equal(realMinute) && (r.Receiver == "v2" || r.Receiver == "") {
				kept = append(kept, fmt.Sprintf("%q %s %d listed %v", r.Receiver, r.Reason, r.Count, r.Listed))
			}
		}
		slices.Sort(kept)
		want := []string{`"" timestamp_outside_window 1 listed true`, `"v2" invalid_signature 1 listed true`}
		if !slices.Equal(kept, want) {
			t.Errorf("the real receivers' rows after the flood:\n got %v\nwant %v", kept, want)
		}
	})
}

// TestRefusalsOutliveAFailedWrite checks that what a write could not store
// is written with the next one, and that the request's way never waits for
// the record.
func TestRefusalsOutliveAFailedWrite(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	rec := &countingRefusals{Store: st}
	rec.fail.Store(1)
	h := NewHandler(Options{Inbox: st, EnvSecrets: []string{envSecret}, Now: func() time.Time { return now }, Refused: RefusedOptions{Store: rec}})
	f := &fixture{h: h, st: st}
	f.send(t, delivery{secret: "whsec_forged"})
	h.flushRefusals(t.Context())
	f.send(t, delivery{secret: "whsec_forged"})
	h.flushRefusals(t.Context())
	rows, err := st.RefusedDeliveries(t.Context(), store.RefusedFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if rec.writes.Load() != 2 || len(rows) != 1 || rows[0].Count != 2 {
		t.Errorf("after a failed write and a good one: %d writes, record %+v; want 2 writes and one row counting 2", rec.writes.Load(), rows)
	}
}

// shutdownRefusals is a record's store whose write reaches the store, then
// waits for the loop's shutdown and reports its context's error, as a
// driver does when a statement it ran is cancelled before it returns.
type shutdownRefusals struct {
	*store.Store
	stopping <-chan struct{}
	writes   atomic.Int64
}

func (s *shutdownRefusals) RecordRefusals(ctx context.Context, rows []store.RefusedDelivery) error {
	s.writes.Add(1)
	if err := s.Store.RecordRefusals(context.WithoutCancel(ctx), rows); err != nil {
		return err
	}
	select {
	case <-s.stopping:
	case <-time.After(time.Second):
	}
	return ctx.Err()
}

// TestShutdownCountsAWriteOnce stops the record's loop while a write is
// in flight, and checks that the write is not cut short and its refusal
// not counted again by the last write.
func TestShutdownCountsAWriteOnce(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	stopping := make(chan struct{})
	rec := &shutdownRefusals{Store: st, stopping: stopping}
	h := NewHandler(Options{Inbox: st, EnvSecrets: []string{envSecret}, Now: func() time.Time { return now }, Refused: RefusedOptions{Store: rec, FlushEvery: 10 * time.Millisecond}})
	(&fixture{h: h, st: st}).send(t, delivery{secret: "whsec_forged"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); h.recordRefusals(ctx) }()
	for rec.writes.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	close(stopping)
	<-done
	rows, err := st.RefusedDeliveries(t.Context(), store.RefusedFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Count != 1 {
		t.Errorf("one refusal, the loop stopped during its write: record %+v; want one row counting 1", rows)
	}
}

// TestNoRecordWithoutAStore checks that a handler without a record's
// store, or with it disabled, counts refusals in the metric only.
func TestNoRecordWithoutAStore(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	for _, o := range []RefusedOptions{{}, {Store: st, Disabled: true}} {
		h := NewHandler(Options{Inbox: st, EnvSecrets: []string{envSecret}, Refused: o})
		if h.refused != nil {
			t.Errorf("%+v keeps a record", o)
		}
		(&fixture{h: h, st: st}).send(t, delivery{secret: "whsec_forged", at: time.Now()})
		h.recordRefusals(t.Context()) // returns at once
	}
	if rows, err := st.RefusedDeliveries(t.Context(), store.RefusedFilter{}); err != nil || len(rows) != 0 {
		t.Errorf("record %v (%v); want none", rows, err)
	}
}

func TestRecordName(t *testing.T) {
	long := strings.Repeat("x", 200)
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"v2", "v2"},
		{"a.b_c-1", "a.b_c-1"},
		{"-dash", `"-dash"`},
		{"a\nb\x1b[0m\"\\é", `"a?b?[0m????"`},
		{long, `"` + long[:62] + `"`},
	} {
		if got := recordName(tc.in); got != tc.want || len(got) > maxLogValue {
			t.Errorf("recordName(%q) = %q (%d bytes), want %q", tc.in, got, len(got), tc.want)
		}
	}
	if got := recordValue("evt_1\x1b[2J\u202e" + long); !strings.HasPrefix(got, "evt_1?[2J?xx") || len(got) > maxLogValue+len("…(+999 bytes)") {
		t.Errorf("recordValue = %q", got)
	}
}

// reasonLiteral finds a reason the handler names: the last argument of a
// call of reject or refuse, or a value given to a variable named reason.
func reasonLiterals(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		lit := func(e ast.Expr) {
			if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
				if s, err := strconv.Unquote(b.Value); err == nil {
					found[s] = true
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "reject" || sel.Sel.Name == "refuse") && len(n.Args) == 4 {
					lit(n.Args[3])
				}
			case *ast.AssignStmt:
				for i, l := range n.Lhs {
					if id, ok := l.(*ast.Ident); ok && id.Name == "reason" && i < len(n.Rhs) {
						lit(n.Rhs[i])
					}
				}
			}
			return true
		})
	}
	return found
}

// TestRefusalReasonsAreListed holds refusalReasons to the reasons the
// handler names, and the lists that name reasons (Retry-After, the limits,
// siteops' own failures, and the Prometheus rules' selectors of them) to
// refusalReasons.
func TestRefusalReasonsAreListed(t *testing.T) {
	named := reasonLiterals(t)
	listed := map[string]bool{}
	for _, r := range refusalReasons {
		listed[r] = true
	}
	if len(named) < 10 {
		t.Fatalf("found only %v in the handler: the test does not see how it names reasons", named)
	}
	for r := range named {
		if !listed[r] {
			t.Errorf("the handler refuses for %q, which refusalReasons does not list", r)
		}
	}
	for r := range listed {
		if !named[r] {
			t.Errorf("refusalReasons lists %q, for which the handler never refuses", r)
		}
	}
	var others []string
	for r := range retryAfter {
		others = append(others, r)
	}
	for r := range refusalLimits {
		others = append(others, r)
	}
	for _, r := range append(others, ownFailures...) {
		if !listed[r] {
			t.Errorf("%q names a reason refusalReasons does not list", r)
		}
	}
	// The rules select siteops' own failures by these lists.
	selector := regexp.MustCompile(`reason(=~|!~)"\|?([a-z_|]+)"`)
	want := slices.Sorted(slices.Values(ownFailures))
	for _, file := range []string{"siteops-recording.yaml", "siteops-alerts.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "deploy", "prometheus", file))
		if err != nil {
			t.Fatal(err)
		}
		ms := selector.FindAllStringSubmatch(string(b), -1)
		if len(ms) == 0 {
			t.Errorf("%s selects no reasons", file)
		}
		for _, m := range ms {
			if got := slices.Sorted(slices.Values(strings.Split(m[2], "|"))); !slices.Equal(got, want) {
				t.Errorf("%s selects %s; siteops' own failures are %v (ownFailures)", file, m[0], want)
			}
		}
	}
}

// TestRefusedSettingsDefaults checks that the defaults of the record's
// settings are the package's.
func TestRefusedSettingsDefaults(t *testing.T) {
	defaults := map[string]string{}
	typ := reflect.TypeFor[config.Ingress]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		defaults[f.Tag.Get("envconfig")] = f.Tag.Get("default")
	}
	if got, err := time.ParseDuration(defaults["SITEOPS_REFUSED_RETENTION"]); err != nil || got != DefaultRefusedRetention {
		t.Errorf("SITEOPS_REFUSED_RETENTION defaults to %q (%v); want %s, DefaultRefusedRetention", defaults["SITEOPS_REFUSED_RETENTION"], err, DefaultRefusedRetention)
	}
	if got, err := strconv.Atoi(defaults["SITEOPS_REFUSED_MAX_ROWS"]); err != nil || got != DefaultRefusedMaxRows {
		t.Errorf("SITEOPS_REFUSED_MAX_ROWS defaults to %q (%v); want %d, DefaultRefusedMaxRows", defaults["SITEOPS_REFUSED_MAX_ROWS"], err, DefaultRefusedMaxRows)
	}
}
