package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/release"
	"github.com/siteops/siteops/rollout"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/workflows"
)

// TestPreviousReleaseBesideThisOne runs the previous release's worker and
// ingress (release.Previous, built from git) and this release's side by
// side on one store, as a rollout does, with the service's deliveries
// going to both ingresses in turn and workflows started on either build,
// then removes the previous release: every delivery is accepted, every
// event dispatched exactly once, every workflow completes, the previous
// release's processes never fail to read the store this release migrated,
// and `siteops release finalize` refuses while an old worker polled
// recently, then runs the contract steps. On SQLite it also rolls back
// once: the previous build becomes current again, new work runs on it, the
// incident this release ran stays on this release, and rolling forward
// again moves on.
func TestPreviousReleaseBesideThisOne(t *testing.T) {
	t.Parallel() // it mostly waits (main_test.go)
	prev := previousBinary(t)
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) { besideThePrevious(t, prev, d) })
	}
}

func besideThePrevious(t *testing.T, prev string, d store.Dialect) {
	w := newReleaseWorld(t, d)
	a := w.worker(t, prev, "build-a")
	ingA := w.ingress(t, "ingress of release 2", prev)
	w.front.route(ingA)
	// The service delivers every event to the front door, signed with the
	// secret the previous release stored.
	w.must(t, prev, "webhook", "create", "--url", w.front.url+"/webhooks/all",
		"--events", "lead.created,knowledge.ready,site.published,site.unpublished")

	api, err := agentsite.NewClient(w.simURL, apiKey)
	if err != nil {
		t.Fatal(err)
	}
	site := func(slug string) string {
		cs, err := api.CreateSite(t.Context(), "site-"+slug, agentsite.NewSite{Title: slug, Slug: slug, Type: "business", Template: "minimal"})
		if err != nil {
			t.Fatal(err)
		}
		return cs.Site.ID
	}
	leadSite := site("leads")
	// Leads arrive all along, bounded: at most 3,000 (a minute).
	stopLeads := make(chan struct{})
	var leads sync.WaitGroup
	leads.Go(func() {
		for range 600 {
			select {
			case <-stopLeads:
				return
			case <-time.After(100 * time.Millisecond):
				_, _ = w.sim.CreateLeads(leadSite, 5)
			}
		}
	})
	defer func() {
		select {
		case <-stopLeads:
		default:
			close(stopLeads)
		}
		leads.Wait()
	}()

	// This release starts beside the previous one; both ingresses serve.
	b := w.worker(t, binary, "build-b")
	ingB := w.ingress(t, "ingress of release 3", binary)
	w.front.route(ingA, ingB)
	onboard := func(bin, slug, want string) {
		t.Helper()
		if out := w.must(t, bin, "onboard", "-f", w.spec(t, slug, false), "--wait"); !strings.Contains(out, "published") {
			t.Errorf("onboarding %s: %s", slug, out)
		}
		if got := w.buildOf(t, workflows.OnboardingID(slug)); got != want {
			t.Errorf("onboarding %s ran on %q, want %s", slug, got, want)
		}
	}
	incident := func(bin, site, want string) {
		t.Helper()
		w.must(t, bin, "embed", "off", "--site", site, "--reason", "side by side")
		w.must(t, bin, "embed", "on", "--site", site)
		if got := w.buildOf(t, workflows.EmbedIncidentID(site)); got != want {
			t.Errorf("the incident of %s ran on %q, want %s", site, got, want)
		}
	}
	onboard(prev, "before-old-cli", "build-a")
	onboard(binary, "before-new-cli", "build-a")
	incident(binary, site("incident-before"), "build-a")

	if out, code := w.run(t, binary, []string{"release", "promote", "--build-id", "build-b"}, "SITEOPS_BUILD_ID=build-b"); code != 0 {
		t.Fatalf("release promote: exit %d\n%s", code, out)
	}
	onboard(prev, "after-old-cli", "build-b")
	onboard(binary, "after-new-cli", "build-b")
	incident(prev, site("incident-after"), "build-b")

	if d == store.SQLite {
		ingB = rollBackOnce(t, w, prev, ingA, ingB, site)
	}

	// The previous release goes: first its ingress, then, once drained,
	// its worker.
	w.front.retire(t, ingB)
	ingA.stop(t)
	var drained string
	siteopstest.Eventually(t, time.Minute, "release drained --build-id build-a to exit 0", func() bool {
		out, code := w.run(t, binary, []string{"release", "drained", "--build-id", "build-a"})
		drained = out
		return code == 0
	})
	a.stop(t)
	onboard(binary, "alone", "build-b")
	close(stopLeads)
	leads.Wait()

	st, err := store.Open(t.Context(), w.dbURL, store.Options{SecretKey: storetest.TestKey})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	siteopstest.Eventually(t, time.Minute, "the store to hold every lead", func() bool {
		n, _ := st.CountLeads(t.Context(), leadSite)
		return n == len(w.sim.LeadIDs(leadSite))
	})
	refused := 0
	for _, r := range w.sim.Deliveries() {
		if r.Outcome != "succeeded" {
			if refused++; refused <= 5 {
				t.Errorf("a delivery was not accepted: %+v", r)
			}
		}
	}
	if n := len(w.sim.Deliveries()); n < 50 {
		t.Errorf("only %d deliveries; the test meant many", n)
	}
	if w.front.servedBy(ingA) == 0 || w.front.servedBy(ingB) == 0 {
		t.Errorf("the front door served release 2's ingress %d and release 3's %d requests; want both", w.front.servedBy(ingA), w.front.servedBy(ingB))
	}
	siteopstest.Eventually(t, time.Minute, "the relay to dispatch every recorded event", func() bool {
		var left int
		err := st.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM inbox WHERE outcome = ''`).Scan(&left)
		return err == nil && left == 0
	})
	checked := dispatchedOnce(t, st.DB())
	for _, p := range []*proc{a, ingA} {
		for _, bad := range []string{"no such table", "no such column", "SQLSTATE 42P01", "SQLSTATE 42703", "do not decrypt", "unreadable", "panic:"} {
			if strings.Contains(p.log.String(), bad) {
				t.Errorf("%s logged %q:\n%s", p.name, bad, grepLines(p.log.String(), bad))
			}
		}
	}
	for _, p := range []*proc{b, ingB} {
		if s := p.log.String(); strings.Contains(s, "TMPRL1100") || strings.Contains(s, "panic:") {
			t.Errorf("%s logged a non-determinism error or a panic:\n%s", p.name, s)
		}
	}

	finalizeAfterThePrevious(t, w, st)
	t.Logf("%s: %d deliveries, %d inbox events each dispatched once; drained: %s", d, len(w.sim.Deliveries()), checked, strings.TrimSpace(drained))
}

// rollBackOnce rolls back to build-a with an incident open on build-b,
// runs new work on build-a, answers the incident (it stays on build-b),
// and rolls forward again. It returns the ingress of this release that
// serves after it.
func rollBackOnce(t *testing.T, w *releaseWorld, prev string, ingA, ingB *proc, site func(string) string) *proc {
	t.Helper()
	open := site("incident-across")
	w.must(t, binary, "embed", "off", "--site", open, "--reason", "open across the rollback")
	openID := workflows.EmbedIncidentID(open)

	out, code := w.run(t, binary, []string{"release", "rollback", "--to-build-id", "build-a", "-o", "json"}, "SITEOPS_BUILD_ID=build-b")
	if code != 0 {
		t.Fatalf("release rollback: exit %d\n%s", code, out)
	}
	var rb rollout.RollbackResult
	if err := json.Unmarshal([]byte(out), &rb); err != nil || rb.From != "build-b" || rb.To != "build-a" || !hasRun(rb.KeptOnFrom, openID) {
		t.Errorf("rollback = %s (%v); want build-b to build-a keeping %s on build-b", out, err, openID)
	}
	// The ingress rolls back too.
	w.front.retire(t, ingA)
	ingB.stop(t)

	if out := w.must(t, prev, "onboard", "-f", w.spec(t, "rolled-back", false), "--wait"); !strings.Contains(out, "published") {
		t.Errorf("an onboarding after the rollback: %s", out)
	}
	if got := w.buildOf(t, workflows.OnboardingID("rolled-back")); got != "build-a" {
		t.Errorf("an onboarding after the rollback ran on %q, want build-a", got)
	}
	incident := site("incident-rolled-back")
	w.must(t, prev, "embed", "off", "--site", incident, "--reason", "after the rollback")
	w.must(t, prev, "embed", "on", "--site", incident)
	if got := w.buildOf(t, workflows.EmbedIncidentID(incident)); got != "build-a" {
		t.Errorf("an incident after the rollback ran on %q, want build-a", got)
	}
	w.must(t, prev, "embed", "on", "--site", open)
	if got := w.buildOf(t, openID); got != "build-b" {
		t.Errorf("the incident open across the rollback finished on %q, want build-b (kept there)", got)
	}
	// The lead sync ran on build-b before the rollback: it stays there.
	if out, code := w.run(t, binary, []string{"release", "drained", "--build-id", "build-b"}); code != 1 || !strings.Contains(out, "lead-sync/") {
		t.Errorf("drained build-b after the rollback: exit %d, want 1 naming the lead sync kept there\n%s", code, out)
	}

	// Forward again.
	next := w.ingress(t, "ingress of release 3, again", binary)
	w.front.route(ingA, next)
	if out, code := w.run(t, binary, []string{"release", "promote", "--build-id", "build-b"}, "SITEOPS_BUILD_ID=build-b"); code != 0 {
		t.Fatalf("release promote after the rollback: exit %d\n%s", code, out)
	}
	return next
}

// finalizeAfterThePrevious runs finalize once the previous release is
// gone: the command refuses while the old worker's last poll is recent,
// and the same checks with a short poll window run the contract steps.
func finalizeAfterThePrevious(t *testing.T, w *releaseWorld, st *store.Store) {
	t.Helper()
	out, code := w.run(t, binary, []string{"release", "finalize"})
	if code != 1 || !strings.Contains(out, "FAIL pollers") || !strings.Contains(out, "build-a") || !strings.Contains(out, "cannot be checked") {
		t.Errorf("finalize right after build-a stopped: exit %d, want 1 naming build-a's recent polls\n%s", code, out)
	}
	r := rollout.New(rollout.Options{Client: w.client, Namespace: releaseNamespace, Deployment: "siteops", TaskQueue: taskQueue, PollWindow: time.Nanosecond})
	rep, err := r.Finalize(t.Context(), st, true, "e2e")
	if err != nil || !rep.Done || rep.Result == nil {
		t.Fatalf("Finalize = %+v, %v; want done", rep, err)
	}
	if out, code := w.run(t, binary, []string{"release", "finalize"}); code != 0 || !strings.Contains(out, "already finalized for release "+itoa(release.Number)) {
		t.Errorf("finalize again: exit %d\n%s", code, out)
	}
	if out := w.must(t, binary, "release", "status"); !strings.Contains(out, "finalized for release "+itoa(release.Number)) {
		t.Errorf("release status after finalize:\n%s", out)
	}
}

// dispatchedOnce checks that every event a relay handled was dispatched
// exactly once across both releases' relays (one successful attempt in the
// inbox's history) and none was lost; lead.created reached its lead sync.
// It returns how many events it checked.
func dispatchedOnce(t *testing.T, db *sql.DB) int {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	var checked int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM inbox WHERE NOT (attempts = 0 AND outcome <> '')`).Scan(&checked); err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryContext(ctx, `
		SELECT i.event_id, i.event_type, i.outcome,
			SUM(CASE WHEN h.kind = $1 AND h.outcome NOT IN ($2, $3) THEN 1 ELSE 0 END) AS dispatched
		FROM inbox i LEFT JOIN inbox_history h ON h.event_id = i.event_id
		WHERE NOT (i.attempts = 0 AND i.outcome <> '')
		GROUP BY i.event_id, i.event_type, i.outcome
		HAVING SUM(CASE WHEN h.kind = $1 AND h.outcome NOT IN ($2, $3) THEN 1 ELSE 0 END) <> 1
			OR i.outcome IN ('', $3)
			OR (i.event_type = 'lead.created' AND i.outcome <> $4)
		ORDER BY i.event_id`,
		store.HistoryAttempt, store.OutcomeFailed, store.OutcomeDead, store.OutcomeSignalled)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	bad := 0
	for rows.Next() {
		var id, typ, outcome string
		var dispatched int
		if err := rows.Scan(&id, &typ, &outcome, &dispatched); err != nil {
			t.Fatal(err)
		}
		if bad++; bad <= 10 {
			t.Errorf("inbox event %s (%s): outcome %q, %d recorded dispatches; want exactly one (signalled, for lead.created)", id, typ, outcome, dispatched)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Error("the inbox holds no event a relay handled")
	}
	return checked
}
