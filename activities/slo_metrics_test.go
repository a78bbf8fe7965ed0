package activities

import (
	"testing"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// globalReader makes the global meter provider one whose metrics the
// returned reader collects, until the test ends.
func globalReader(t *testing.T) *sdkmetric.ManualReader {
	t.Helper()
	prev := otel.GetMeterProvider()
	reader := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	t.Cleanup(func() { otel.SetMeterProvider(prev) })
	return reader
}

// histogramCount reads how many samples a histogram without attributes
// holds.
func histogramCount(t *testing.T, reader *sdkmetric.ManualReader, name string) uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == name {
				var n uint64
				for _, dp := range h.DataPoints {
					n += dp.Count
				}
				return n
			}
		}
	}
	return 0
}

// TestLeadSyncLagOnlyWhenCaughtUp checks siteops.lead_sync.lag: no sample
// for a run paused at its page budget (the store does not hold the newest
// leads yet), one for the run that reads the collection to its end.
func TestLeadSyncLagOnlyWhenCaughtUp(t *testing.T) {
	reader := globalReader(t)
	f := newLeadsFixture(t, 25)
	const name = "siteops.lead_sync.lag"
	paused, err := f.run(t, SyncLeadsInput{SiteID: f.site, Limit: 10, MaxPages: 1})
	if err != nil {
		t.Fatal(err)
	}
	if paused.CaughtUp {
		t.Fatalf("a run of one page of 10 over 25 leads caught up: %+v", paused)
	}
	if n := histogramCount(t, reader, name); n != 0 {
		t.Errorf("after a paused run, %s holds %d samples, want 0", name, n)
	}
	if _, err := f.run(t, SyncLeadsInput{SiteID: f.site, Limit: 10, From: paused.Resume}); err != nil {
		t.Fatal(err)
	}
	if n := histogramCount(t, reader, name); n != 1 {
		t.Errorf("after the run that caught up, %s holds %d samples, want 1", name, n)
	}
}
