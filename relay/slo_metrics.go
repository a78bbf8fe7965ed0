package relay

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/siteops/siteops/store"
)

// signalDelayBuckets are the bounds of siteops_relay_signal_delay_seconds:
// fine below the priority lane's objective (5 s) and the bulk lane's
// (60 s), coarse up to the hour that a dead letter's retries span.
func signalDelayBuckets() []float64 {
	return []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600}
}

// newSignalDelay makes the histogram siteops_relay_signal_delay_seconds
// {lane}, the service level "from the 2xx to the signal in the workflow's
// history": its only label is the lane, two values.
func newSignalDelay(mt metric.Meter) metric.Float64Histogram {
	h, _ := mt.Float64Histogram("siteops.relay.signal_delay",
		metric.WithUnit("s"),
		metric.WithDescription("Time from recording a webhook event (just before its 2xx) to the signal that carried it to its workflow, by lane (priority, bulk); a replayed event counts from its first recording."),
		metric.WithExplicitBucketBoundaries(signalDelayBuckets()...))
	return h
}

// signalDelays records, for each event of a recorded batch that reached
// its workflow (outcome signalled), how long after its recording the
// dispatch was recorded. The events' recording times come from the jobs
// of the batch, which hold every event done names.
func (m *Metrics) signalDelays(ctx context.Context, lane store.Lane, js []*job, done []store.Dispatch, now time.Time) {
	if m.signalDelay == nil {
		return
	}
	received := map[string]time.Time{}
	for _, j := range js {
		for _, ev := range j.evs {
			received[ev.EventID] = ev.ReceivedAt
		}
	}
	attrs := metric.WithAttributes(attribute.String("lane", laneName(lane)))
	for _, d := range done {
		at, ok := received[d.EventID]
		if d.Outcome != store.OutcomeSignalled || !ok {
			continue
		}
		m.signalDelay.Record(ctx, max(now.Sub(at), 0).Seconds(), attrs)
	}
}
