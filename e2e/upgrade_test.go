package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/release"
	"github.com/siteops/siteops/rollout"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// TestUpgradeAsDeployDoes upgrades a running system from the previous
// release (build-a, release.Previous built from git) to this one (build-b)
// the way deploy/kubernetes/rollout.sh does, with work waiting at the
// switch: an embed incident waiting for on-call, a secret rotation waiting
// for its decision, an onboarding with one of its two sources ready and
// one started just before the switch, and a lead sync.
//
// The previous release pins incidents and rotations; `siteops release
// promote --build-id build-b` makes build-b current and moves them onto it,
// so on-call's answers run on the new code. The onboardings stay on
// build-a and publish there; `siteops release drained --build-id build-a`
// exits 0 only once they have, and then build-a is stopped. Every piece of
// work completes, and new work runs on build-b.
func TestUpgradeAsDeployDoes(t *testing.T) {
	prev := previousBinary(t)
	w := newReleaseWorld(t, store.SQLite)
	st := starter.New(starter.Options{Client: w.client, TaskQueue: taskQueue, Namespace: releaseNamespace})

	// The previous release runs: its worker made itself current, and its
	// ingress takes deliveries behind the front door.
	a := w.worker(t, prev, "build-a")
	if !strings.Contains(a.log.String(), "this build is now current") {
		t.Fatalf("build-a did not make itself current:\n%s", a.log)
	}
	ingA := w.ingress(t, "ingress of release 2", prev)
	w.front.route(ingA)

	// Work in flight, started with the previous release's commands.
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
	leadSite, incidentSite := site("leads"), site("incident")
	if _, err := st.SyncLeads(t.Context(), leadSite, false); err != nil {
		t.Fatal(err)
	}
	w.must(t, prev, "embed", "off", "--site", incidentSite, "--reason", "upgrade drill")
	var created struct {
		EndpointID string `json:"endpoint_id"`
	}
	if err := json.Unmarshal([]byte(w.must(t, prev, "webhook", "create", "--url", w.front.url+"/webhooks/v1", "--events", "lead.created", "-o", "json")), &created); err != nil || created.EndpointID == "" {
		t.Fatalf("webhook create: %+v, %v", created, err)
	}
	w.must(t, prev, "secret", "rotate", "--endpoint", created.EndpointID, "--url", w.front.url+"/webhooks/v2",
		"--verify-timeout", "1s", "--decision-timeout", "1h")
	rotationID := workflows.SecretRotationID(created.EndpointID)
	siteopstest.Eventually(t, 30*time.Second, "the rotation to wait for on-call's decision", func() bool {
		var s workflows.SecretRotationStatus
		v, err := w.client.QueryWorkflow(t.Context(), rotationID, "", workflows.QueryRotation)
		return err == nil && v.Get(&s) == nil && s.Step == workflows.RotationDeciding
	})
	w.must(t, prev, "onboard", "-f", w.spec(t, "upgrade-one", true))
	one := workflows.OnboardingID("upgrade-one")
	waitStep(t, w, one, workflows.StepWaitingKnowledge)
	siteOne := w.onboardingStatus(t, one).SiteID
	w.knowledgeReady(t, siteOne, "kn_1") // its sources are kn_1 and kn_2
	siteopstest.Eventually(t, 30*time.Second, "one of upgrade-one's two sources to be ready", func() bool {
		return w.onboardingStatus(t, one).KnowledgeReady == 1
	})

	// The new build starts beside the old one and waits to be promoted.
	b := w.worker(t, binary, "build-b")
	if !strings.Contains(b.log.String(), "siteops release promote --build-id build-b") {
		t.Errorf("build-b's warning does not say how to promote it:\n%s", b.log)
	}
	// One more onboarding just before the switch, with this release's
	// command: build-a, still current, runs it.
	w.must(t, binary, "onboard", "-f", w.spec(t, "upgrade-two", true))
	two := workflows.OnboardingID("upgrade-two")
	waitStep(t, w, two, workflows.StepWaitingKnowledge)
	siteTwo := w.onboardingStatus(t, two).SiteID
	incidentID := workflows.EmbedIncidentID(incidentSite)
	for _, id := range []string{one, two, incidentID, rotationID} {
		if got := w.buildOf(t, id); got != "build-a" {
			t.Fatalf("before the switch %s runs on %q, want build-a", id, got)
		}
	}

	// The switch, as rollout.sh runs it from the new image.
	out, code := w.run(t, binary, []string{"release", "promote", "--build-id", "build-b", "-o", "json"}, "SITEOPS_BUILD_ID=build-b")
	if code != 0 {
		t.Fatalf("release promote: exit %d\n%s", code, out)
	}
	var promoted rollout.PromoteResult
	if err := json.Unmarshal([]byte(out), &promoted); err != nil {
		t.Fatalf("release promote -o json printed %s: %v", out, err)
	}
	if promoted.Previous != "build-a" || !hasRun(promoted.Moved, incidentID) || !hasRun(promoted.Moved, rotationID) ||
		!hasRun(promoted.StayPinned, one) || !hasRun(promoted.StayPinned, two) {
		t.Errorf("promote = %+v; want build-a before, the incident and the rotation moved, both onboardings staying", promoted)
	}
	if out, code := w.run(t, binary, []string{"release", "promote", "--build-id", "build-b"}, "SITEOPS_BUILD_ID=build-b"); code != 0 || !strings.Contains(out, "already the current version") {
		t.Errorf("promote again: exit %d\n%s", code, out)
	}
	if out, code := w.run(t, binary, []string{"release", "drained", "--build-id", "build-a"}); code != 1 || !strings.Contains(out, one) || !strings.Contains(out, two) {
		t.Errorf("drained while two onboardings are pinned to build-a: exit %d, want 1 naming them\n%s", code, out)
	}

	// The ingress rolls: the new replica takes over the front door.
	ingB := w.ingress(t, "ingress of release 3", binary)
	w.front.retire(t, ingB)
	ingA.stop(t)

	// On-call answers the waiting incident: it runs on the new build.
	began := time.Now()
	if out := w.must(t, binary, "embed", "on", "--site", incidentSite); !strings.Contains(out, "back on") {
		t.Errorf("embed on: %s", out)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("embed on took %s, want within 10 s", took)
	}
	if got := w.buildOf(t, incidentID); got != "build-b" {
		t.Errorf("the incident was answered on %q, want build-b", got)
	}
	if out := w.must(t, binary, "secret", "proceed", "--endpoint", created.EndpointID, "--yes"); !strings.Contains(out, "done") {
		t.Errorf("secret proceed: %s", out)
	}
	if got := w.buildOf(t, rotationID); got != "build-b" {
		t.Errorf("the rotation finished on %q, want build-b", got)
	}

	// The remaining knowledge arrives; both onboardings publish on build-a.
	w.knowledgeReady(t, siteOne, "kn_2")
	w.knowledgeReady(t, siteTwo, "kn_3")
	w.knowledgeReady(t, siteTwo, "kn_4")
	for _, id := range []string{one, two} {
		var res workflows.OnboardingResult
		if err := w.client.GetWorkflow(t.Context(), id, "").Get(ctxWithin(t, time.Minute), &res); err != nil || res.Status != "published" {
			t.Fatalf("%s: %+v, %v", id, res, err)
		}
		if got := w.buildOf(t, id); got != "build-a" {
			t.Errorf("%s finished on %q, want build-a (it is pinned)", id, got)
		}
	}

	// Only now may build-a go.
	var drained string
	siteopstest.Eventually(t, time.Minute, "release drained --build-id build-a to exit 0", func() bool {
		out, code := w.run(t, binary, []string{"release", "drained", "--build-id", "build-a"})
		drained = out
		return code == 0
	})
	if !strings.Contains(drained, "build build-a of deployment siteops: drained") {
		t.Errorf("drained printed %s", drained)
	}
	a.stop(t)

	// New work runs on build-b alone.
	fresh := site("fresh")
	w.must(t, binary, "embed", "off", "--site", fresh, "--reason", "after the upgrade")
	w.must(t, binary, "embed", "on", "--site", fresh)
	if got := w.buildOf(t, workflows.EmbedIncidentID(fresh)); got != "build-b" {
		t.Errorf("a new incident ran on %q, want build-b", got)
	}
	if out := w.must(t, binary, "onboard", "-f", w.spec(t, "upgrade-three", false), "--wait"); !strings.Contains(out, "published") {
		t.Errorf("a new onboarding: %s", out)
	}
	if got := w.buildOf(t, workflows.OnboardingID("upgrade-three")); got != "build-b" {
		t.Errorf("a new onboarding ran on %q, want build-b", got)
	}
	if _, err := st.SyncLeads(t.Context(), leadSite, false); err != nil {
		t.Fatal(err)
	}
	siteopstest.Eventually(t, 30*time.Second, "the lead sync to move to build-b", func() bool { return w.buildOf(t, workflows.LeadSyncID(leadSite)) == "build-b" })
	d, err := w.client.DescribeWorkflow(t.Context(), workflows.LeadSyncID(leadSite), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.RawResponse.GetWorkflowExecutionInfo().GetVersioningInfo().GetBehavior(); got != enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE {
		t.Errorf("the lead sync's behaviour = %v, want AutoUpgrade", got)
	}
	if out := w.must(t, binary, "release", "status"); !strings.Contains(out, "current build-b") {
		t.Errorf("release status:\n%s", out)
	}
	for _, p := range []*proc{a, b, ingA, ingB} {
		if s := p.log.String(); strings.Contains(s, "TMPRL1100") || strings.Contains(s, "panic:") {
			t.Errorf("%s logged a non-determinism error or a panic:\n%s", p.name, s)
		}
	}
	_ = w.client.CancelWorkflow(context.WithoutCancel(t.Context()), workflows.LeadSyncID(leadSite), "")
	t.Logf("upgraded from release %d (%s) to release %d", release.Previous.Number, release.Previous.Date, release.Number)
}

// waitStep waits until an onboarding reports step.
func waitStep(t *testing.T, w *releaseWorld, workflowID, step string) {
	t.Helper()
	siteopstest.Eventually(t, 30*time.Second, workflowID+" to reach "+step, func() bool { return w.onboardingStatus(t, workflowID).Step == step })
}

func hasRun(runs []rollout.Run, workflowID string) bool {
	return slices.ContainsFunc(runs, func(r rollout.Run) bool { return r.WorkflowID == workflowID })
}
