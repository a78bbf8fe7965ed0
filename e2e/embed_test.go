package e2e

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

func TestEmbedOffThenRestore(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	api, _ := agentsite.NewClient(e.SimURL, apiKey)
	cs, err := api.CreateSite(t.Context(), "embed-site", agentsite.NewSite{Title: "E", Slug: "embed", Type: "business", Template: "minimal"})
	if err != nil {
		t.Fatal(err)
	}
	site := cs.Site.ID
	if _, err := e.Starter.EmbedOn(t.Context(), site, nil, "bob"); !errors.Is(err, starter.ErrNoOpenIncident) {
		t.Fatalf("embed on without an incident: %v", err)
	}
	off, err := e.Starter.EmbedOff(ctxWithin(t, time.Minute), site, "alice", "origin leak")
	if err != nil || off.Joined || off.Status.State != workflows.IncidentOff {
		t.Fatalf("embed off: %+v, %v", off, err)
	}
	// It returned once the PATCH was acknowledged.
	if n := len(patches(e)); n != 1 {
		t.Fatalf("%d PATCHes when embed off returned, want 1", n)
	}
	d, err := e.Client.DescribeWorkflow(t.Context(), workflows.EmbedIncidentID(site), "")
	if err != nil {
		t.Fatal(err)
	}
	sa := d.RawResponse.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	if sa[starter.SearchAttrSiteID] == nil || !strings.Contains(string(sa[starter.SearchAttrOperator].GetData()), "alice") {
		t.Errorf("search attributes = %v, want the site and the operator", sa)
	}
	// A second "embed off" while the incident is open joins it.
	if again, err := e.Starter.EmbedOff(ctxWithin(t, time.Minute), site, "carol", "again"); err != nil || !again.Joined || again.Status.Operator != "alice" {
		t.Fatalf("second embed off: %+v, %v", again, err)
	}
	st, err := e.Starter.EmbedOn(ctxWithin(t, time.Minute), site, []string{"https://fixed.example"}, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != workflows.IncidentRestored || st.Operator != "alice" || st.DecidedBy != "bob" {
		t.Errorf("status = %+v", st)
	}
	_ = e.Client.GetWorkflow(t.Context(), workflows.EmbedIncidentID(site), "").Get(t.Context(), nil)
	recordHistory(t, e, workflows.EmbedIncidentID(site), "embed_incident_restored")
	ps := patches(e)
	if len(ps) != 2 || ps[0].IdempotencyKey == ps[1].IdempotencyKey {
		t.Fatalf("PATCHes = %+v, want exactly two with different keys", ps)
	}
	s := e.Sim.Sites()[0]
	if !s.EmbedEnabled || len(s.AllowedOrigins) != 1 || s.AllowedOrigins[0] != "https://fixed.example" {
		t.Errorf("agent after restore = %+v", s)
	}
	// A new incident on the same site gets new keys.
	if _, err := e.Starter.EmbedOff(ctxWithin(t, time.Minute), site, "alice", "second incident"); err != nil {
		t.Fatal(err)
	}
	if n := len(patches(e)); n != 3 {
		t.Fatalf("%d PATCHes after the second incident's embed off, want 3", n)
	}
	if ps := patches(e); ps[2].IdempotencyKey == ps[0].IdempotencyKey {
		t.Errorf("the second incident reused the first one's key %q", ps[2].IdempotencyKey)
	}
	if _, err := e.Starter.EmbedClose(ctxWithin(t, time.Minute), site, "alice"); err != nil {
		t.Fatal(err)
	}
	_ = e.Client.GetWorkflow(t.Context(), workflows.EmbedIncidentID(site), "").Get(t.Context(), nil)
	recordHistory(t, e, workflows.EmbedIncidentID(site), "embed_incident_closed")
}

func patches(e *env) []simulator.RequestRecord {
	var out []simulator.RequestRecord
	for _, r := range e.Sim.Requests() {
		if r.Method == "PATCH" {
			out = append(out, r)
		}
	}
	return out
}
