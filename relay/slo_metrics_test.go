package relay

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/siteops/siteops/store"
)

// histogram returns the sample count and sum of a histogram series of reg
// with the label lane.
func histogram(t *testing.T, reg *prometheus.Registry, name, lane string) (count uint64, sum float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "lane" && l.GetValue() == lane {
					return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return 0, 0
}

// TestSignalDelayPerLane checks siteops_relay_signal_delay_seconds: one
// sample per event that reached its workflow, in its lane, measured from
// its recording to the recorded dispatch; none for an event without a
// workflow or whose dispatch failed.
func TestSignalDelayPerLane(t *testing.T) {
	eachDialect(t, func(t *testing.T, d store.Dialect) {
		f := newRelayFixture(t, d, 0)
		const name = "siteops_relay_signal_delay_seconds"
		if err := f.st.SetSiteWorkflow(t.Context(), "site_1", "onboarding/site-1"); err != nil {
			t.Fatal(err)
		}
		f.record(t, "evt_k1", "knowledge.ready", `{"site_id":"site_1","knowledge_id":"kn_1"}`)
		f.record(t, "evt_k2", "knowledge.ready", `{"site_id":"site_unknown","knowledge_id":"kn_2"}`) // no-target
		f.record(t, "evt_l1", "lead.created", `{"site_id":"site_1","lead_id":"lead_1"}`)
		f.record(t, "evt_l2", "lead.created", `{"site_id":"site_1","lead_id":"lead_2"}`)
		f.advance(3 * time.Second)
		if n := f.dispatchAll(t); n != 4 {
			t.Fatalf("claimed %d events, want 4", n)
		}
		for _, c := range []struct {
			lane  string
			count uint64
			sum   float64
		}{
			{"priority", 1, 3}, // evt_k1; evt_k2 reached no workflow
			{"bulk", 2, 6},     // both lead.created, in one signal
		} {
			if count, sum := histogram(t, f.reg, name, c.lane); count != c.count || sum != c.sum {
				t.Errorf("%s{lane=%q}: count %d, sum %v; want %d, %v", name, c.lane, count, sum, c.count, c.sum)
			}
		}

		// A failed dispatch is no signal: nothing more is recorded.
		f.tmp.mu.Lock()
		f.tmp.fail = errors.New("connection refused")
		f.tmp.mu.Unlock()
		f.record(t, "evt_k3", "knowledge.ready", `{"site_id":"site_1","knowledge_id":"kn_3"}`)
		f.advance(time.Second)
		f.dispatchAll(t)
		if count, _ := histogram(t, f.reg, name, "priority"); count != 1 {
			t.Errorf("after a failed dispatch, %s{lane=\"priority\"} counts %d, want 1", name, count)
		}
	})
}
