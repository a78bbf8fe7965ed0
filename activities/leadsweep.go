package activities

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
)

// DefaultSweepSites is how many sites one SweepLeads run checks before it
// returns to its workflow when SweepLeadsInput.MaxSites is zero.
const DefaultSweepSites = 500

// sweepBatch is how many sites SweepLeads reads from the store at a time.
const sweepBatch = 100

// SweepLeadsInput checks the sites after After (in site id order).
type SweepLeadsInput struct {
	After string `json:"after,omitempty"`
	// MaxSites bounds one run (DefaultSweepSites when zero).
	MaxSites int `json:"max_sites,omitempty"`
	// PageLimit is the page size of the one page read per site: the
	// lead syncs' own (0 lets the server choose).
	PageLimit int `json:"page_limit,omitempty"`
}

// SweepLeadsResult is what a SweepLeads run found. It never holds lead
// records, only site ids and counts.
type SweepLeadsResult struct {
	// Checked counts the sites whose stored leads were found current.
	Checked int `json:"checked"`
	// Missed names the sites with leads the store does not hold: a
	// lead.created delivery that never came, or is still on its way.
	Missed []string `json:"missed,omitempty"`
	// MissedBy is, for each of Missed, the key of the sync that last
	// stored a page of the site: it says whether that was the site's own
	// lead sync or a lead event shard, which the workflow signals.
	MissedBy []string `json:"missed_by,omitempty"`
	// Syncing counts the sites skipped because their sync stopped short
	// of the end of the collection (it is under way, or its workflow goes
	// on with it).
	Syncing int `json:"syncing"`
	// Failed counts the sites that could not be checked: their read
	// failed (the site is gone, the key lacks leads:read, a 5xx, the
	// network) or their position does not decode. Each is recorded in the
	// store with the failure's class (store.RecordLeadSweepFailure), which
	// the overview lists, and logged with its site id.
	Failed int `json:"failed"`
	// Next is the last site id handled: the next run starts after it.
	Next string `json:"next,omitempty"`
	// Done is true when no site is left after Next.
	Done bool `json:"done"`
}

func (r SweepLeadsResult) handled() int { return r.Checked + len(r.Missed) + r.Syncing + r.Failed }

// sweepVerdict is what checking one site found.
type sweepVerdict int

const (
	sweepCurrent sweepVerdict = iota
	sweepMissed
	sweepSyncing
	sweepFailed
)

// SweepLeads is the lead syncs' safety net: for each site with a lead
// sync position (store.LeadSweepSites) whose sync reached the end of the
// collection, it reads the one page the sync would resume from and
// reports the site as missed when that page holds a lead the store does
// not or has a next page. A site found current is recorded as checked
// (store.LeadSyncChecked). It costs one API read per site and no
// Temporal action per site: the workflow signals only the missed ones.
//
// A site whose read fails does not stop the sweep: it is recorded as
// failing and the sweep goes on with the next. Only what is not the
// site's fails the attempt: the store, and the API as a whole asking for
// a delay (the client's circuit breaker open after consecutive failures,
// the shared limit paused, a 429 or 503). Temporal retries it after that
// delay from the last site handled, which is heartbeated before the
// attempt fails (and every few seconds meanwhile).
func (a *Activities) SweepLeads(ctx context.Context, in SweepLeadsInput) (SweepLeadsResult, error) {
	most := in.MaxSites
	if most <= 0 {
		most = DefaultSweepSites
	}
	res := SweepLeadsResult{Next: in.After}
	if activity.HasHeartbeatDetails(ctx) {
		var saved SweepLeadsResult
		if err := activity.GetHeartbeatDetails(ctx, &saved); err == nil {
			res = saved
			// An attempt of a release before MissedBy recorded none.
			for len(res.MissedBy) < len(res.Missed) {
				res.MissedBy = append(res.MissedBy, "")
			}
		}
	}
	var mu sync.Mutex
	snapshot := func() SweepLeadsResult {
		mu.Lock()
		defer mu.Unlock()
		r := res
		r.Missed = append([]string(nil), res.Missed...)
		r.MissedBy = append([]string(nil), res.MissedBy...)
		return r
	}
	stop := tick(ctx, heartbeatEvery, func() { activity.RecordHeartbeat(ctx, snapshot()) })
	defer stop()
	for res.handled() < most {
		sites, err := a.store.LeadSweepSites(ctx, res.Next, min(sweepBatch, most-res.handled()))
		if err != nil {
			return SweepLeadsResult{}, classify(err)
		}
		if len(sites) == 0 {
			mu.Lock()
			res.Done = true
			mu.Unlock()
			break
		}
		for _, site := range sites {
			verdict, err := a.sweepSite(ctx, site, in.PageLimit)
			if err != nil {
				// The retry goes on after the sites handled, those
				// recorded as failing among them.
				activity.RecordHeartbeat(ctx, snapshot())
				return SweepLeadsResult{}, err
			}
			mu.Lock()
			switch verdict {
			case sweepCurrent:
				res.Checked++
			case sweepMissed:
				res.Missed = append(res.Missed, site.SiteID)
				res.MissedBy = append(res.MissedBy, site.SyncKey)
			case sweepSyncing:
				res.Syncing++
			case sweepFailed:
				res.Failed++
			}
			res.Next = site.SiteID
			mu.Unlock()
		}
	}
	activity.GetLogger(ctx).Info("lead sweep checked sites", "checked", res.Checked, "missed", len(res.Missed), "syncing", res.Syncing, "failed", res.Failed, "next", res.Next, "done", res.Done)
	return snapshot(), nil
}

// sweepSite checks one site. It returns an error only for what a retry
// of the whole run may fix: the store, or the API as a whole
// (sweepReadFailure); a site whose read fails is recorded as failing.
func (a *Activities) sweepSite(ctx context.Context, site store.LeadSweepSite, limit int) (sweepVerdict, error) {
	log := activity.GetLogger(ctx)
	switch {
	case site.Undecodable:
		log.Warn("lead sweep: the site's stored lead sync position does not decode; the site is not checked", "site_id", site.SiteID)
		return a.sweepFailed(ctx, site, "position_undecodable")
	case !site.Position.Done && (site.Position.LastPageAt.IsZero() || a.now().Sub(site.Position.LastPageAt) < DefaultStallTimeout):
		return sweepSyncing, nil
	case !site.Position.Done:
		// A sync that stopped short and stored nothing for the stall
		// timeout has ended (a shard gave the site up, a lead sync
		// failed): whatever it left unread is missed.
		return sweepMissed, nil
	}
	var page *agentsite.LeadPage
	var err error
	for p, e := range a.api.LeadPages(a.calling(ctx, agentsite.ClassBulk), site.SiteID, agentsite.ListLeadsOptions{Limit: limit, Cursor: site.Position.Resume}) {
		page, err = p, e
		break
	}
	if err != nil {
		if fail := sweepReadFailure(ctx, err); fail != nil {
			return 0, fail
		}
		reason := failureReason(err)
		log.Warn("lead sweep: the site's leads cannot be read; the site is recorded as failing and the sweep goes on", "site_id", site.SiteID, "reason", reason, "error", classify(err))
		return a.sweepFailed(ctx, site, reason)
	}
	if site.Failing {
		if err := a.store.ClearLeadSweepFailure(ctx, site.SiteID); err != nil {
			return 0, classify(err)
		}
	}
	if page.Next != nil {
		return sweepMissed, nil
	}
	ids := make([]string, len(page.Leads))
	for i, l := range page.Leads {
		ids[i] = l.ID
	}
	known, err := a.store.KnownLeads(ctx, site.SiteID, ids)
	if err != nil {
		return 0, classify(err)
	}
	if known < len(ids) {
		return sweepMissed, nil
	}
	if err := a.store.LeadSyncChecked(ctx, site.SiteID, site.SyncKey, a.now()); err != nil {
		return 0, classify(err)
	}
	return sweepCurrent, nil
}

// sweepReadFailure is the error that fails a sweep's attempt for a failed
// read of one site, nil when the failure is the site's alone: a
// cancellation, and the API as a whole asking for a delay (the breaker
// open, the shared limit paused, a 429 or 503: classify's ErrTypeRetryable)
// fail the attempt; every other failure (a 5xx, the network, a timeout,
// what no retry fixes) is the site's.
func sweepReadFailure(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return err
	}
	var app *temporal.ApplicationError
	if c := classify(err); errors.As(c, &app) && app.Type() == ErrTypeRetryable {
		return c
	}
	return nil
}

// sweepFailed records the site as failing for reason and returns its
// verdict.
func (a *Activities) sweepFailed(ctx context.Context, site store.LeadSweepSite, reason string) (sweepVerdict, error) {
	if err := a.store.RecordLeadSweepFailure(ctx, site.SiteID, reason, a.now()); err != nil {
		return 0, classify(err)
	}
	return sweepFailed, nil
}

// tick calls f every period until ctx ends or the returned stop is called;
// stop waits for a call under way. The first call is a period away.
func tick(ctx context.Context, period time.Duration, f func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				f()
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
