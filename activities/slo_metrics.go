package activities

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.temporal.io/sdk/activity"
)

// The service levels the activities measure, on the global meter provider
// as every activity metric is:
//
//	siteops_onboarding_time_to_published_seconds  histogram
//	siteops_lead_sync_lag_seconds                 histogram
//
// Neither has a label: a site id would make one series per site. Both are
// recorded rarely (once per onboarding, once per lead sync run that
// catches up), so each looks its instrument up when it records instead of
// adding fields to Activities: the meter hands back the same instrument
// every time.
const sloMeterName = "github.com/siteops/siteops/activities"

// onboardingBuckets run from a minute (no knowledge to wait for) to the 7
// days an onboarding may wait for its knowledge.
func onboardingBuckets() []float64 {
	return []float64{10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400, 259200, 604800}
}

// leadSyncBuckets run from a sync that catches up at once to the hour its
// stall timeout allows by default.
func leadSyncBuckets() []float64 {
	return []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600}
}

// published records siteops_onboarding_time_to_published_seconds: the time
// from the start of the workflow run that publishes a site (an
// onboarding: the only workflow that publishes, and it says when it
// started) to the publication the service confirmed.
func (a *Activities) published(ctx context.Context, in PublishInput) {
	if !in.Published || in.StartedAt.IsZero() {
		return
	}
	h, _ := otel.Meter(sloMeterName).Float64Histogram("siteops.onboarding.time_to_published",
		metric.WithUnit("s"),
		metric.WithDescription("Time from the start of an onboarding run to its site's publication, as the service confirmed it."),
		metric.WithExplicitBucketBoundaries(onboardingBuckets()...))
	h.Record(context.WithoutCancel(ctx), max(a.now().Sub(in.StartedAt), 0).Seconds())
}

// caughtUp records siteops_lead_sync_lag_seconds when a lead sync run has
// read the site's collection to its end: the store then holds the newest
// lead the service listed, and the lag is how long that took from when
// the workflow asked for the run (woken by a lead.created signal, or on
// its schedule), retries included. The time from a lead.created delivery
// to that signal is siteops_relay_signal_delay_seconds{lane="bulk"}.
func (a *Activities) caughtUp(ctx context.Context) {
	if !activity.IsActivity(ctx) {
		return
	}
	scheduled := activity.GetInfo(ctx).ScheduledTime
	if scheduled.IsZero() {
		return
	}
	h, _ := otel.Meter(sloMeterName).Float64Histogram("siteops.lead_sync.lag",
		metric.WithUnit("s"),
		metric.WithDescription("Time from a lead sync's request for a run to the store holding every lead the service listed (the run read the collection to its end)."),
		metric.WithExplicitBucketBoundaries(leadSyncBuckets()...))
	h.Record(context.WithoutCancel(ctx), max(a.now().Sub(scheduled), 0).Seconds())
}
