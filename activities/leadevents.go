package activities

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/siteops/siteops/store"
)

// SiteLeadEvents is one site a lead event shard syncs, with the
// lead.created events that woke it since its last sync: Events counted
// once each, Duplicates the deliveries of events already counted.
type SiteLeadEvents struct {
	SiteID     string `json:"site_id"`
	Events     int    `json:"events,omitempty"`
	Duplicates int    `json:"duplicates,omitempty"`
}

// SyncSiteLeadsInput is one sync of many sites' leads: those a lead event
// shard was woken for since its last one.
type SyncSiteLeadsInput struct {
	// Key names this sync (the shard makes it once, and a retried
	// attempt carries the same); each site's is Key/site_id, under which
	// the store keeps its position (UpsertLeadsAt) and counts it once
	// (RecordLeadSiteSync).
	Key string `json:"key"`
	// Order is when the shard scheduled the sync (its workflow clock, in
	// ms): the store keeps a site's record from the latest sync, so that
	// an attempt that outlived its timeout and records late changes
	// nothing.
	Order int64            `json:"order,omitempty"`
	Sites []SiteLeadEvents `json:"sites"`
	// Limit is the page size; MaxPages the pages read of one site before
	// the site waits for the shard's next sync (0: no bound).
	Limit    int `json:"limit,omitempty"`
	MaxPages int `json:"max_pages,omitempty"`
}

// SyncSiteLeadsResult says how the sync ended for each site it did not
// finish: every site of the input not named here was read to the end of
// its collection.
type SyncSiteLeadsResult struct {
	Synced int `json:"synced"`
	Pages  int `json:"pages"`
	New    int `json:"new"`
	// More names the sites with pages left past MaxPages; Retry those
	// whose reads failed on an error a retry may fix (throttling, 5xx,
	// the network); Failed those no retry can fix (the site is gone, the
	// key may not read it), recorded with the reason in the store.
	More   []string `json:"more,omitempty"`
	Retry  []string `json:"retry,omitempty"`
	Failed []string `json:"failed,omitempty"`
}

// siteLeadSyncs is how many sites one SyncSiteLeads reads at once. The
// API client's rate limit for bulk reads holds them all; more than a few
// only queue there.
const siteLeadSyncs = 8

// SyncSiteLeads reads the leads of many sites to the end of their
// collections, each from where the store says its last sync stopped
// (store.LeadSyncFrom), storing every page with the site's position in
// one transaction, as SyncLeads does. One Temporal activity thus carries
// the lead.created events of many sites: the cost of an event in
// Temporal actions falls with the number of sites that travel together.
//
// A site whose reads fail does not hold back the others: it is named in
// the result (Retry, Failed) and the shard decides when to try it again.
// The activity itself fails, to be retried, only when the store cannot be
// reached for any site; its retry goes on from each site's stored
// position, and a site it finished before counts once.
func (a *Activities) SyncSiteLeads(ctx context.Context, in SyncSiteLeadsInput) (SyncSiteLeadsResult, error) {
	started := time.Now()
	stop := tick(ctx, heartbeatEvery, func() { activity.RecordHeartbeat(ctx) })
	defer stop()
	var (
		mu       sync.Mutex
		res      SyncSiteLeadsResult
		storeErr error
		wg       sync.WaitGroup
	)
	sem := make(chan struct{}, siteLeadSyncs)
	for _, site := range in.Sites {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			o := a.syncSite(ctx, in, site)
			mu.Lock()
			defer mu.Unlock()
			res.Pages += o.pages
			res.New += o.fresh
			switch {
			case o.storeErr != nil:
				storeErr = o.storeErr
				res.Retry = append(res.Retry, site.SiteID)
			case o.failed:
				res.Failed = append(res.Failed, site.SiteID)
			case o.retry:
				res.Retry = append(res.Retry, site.SiteID)
			case o.more:
				res.More = append(res.More, site.SiteID)
			default:
				res.Synced++
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return SyncSiteLeadsResult{}, ctx.Err()
	}
	if storeErr != nil && len(res.Retry) == len(in.Sites) {
		return SyncSiteLeadsResult{}, storeErr
	}
	activity.GetLogger(ctx).Info("lead event sync done", "sites", len(in.Sites), "synced", res.Synced, "pages", res.Pages, "new_leads", res.New,
		"more", len(res.More), "retry", len(res.Retry), "failed", len(res.Failed), "took", time.Since(started).Round(time.Millisecond))
	return res, nil
}

// retried says whether this is a retried attempt of the activity.
func retried(ctx context.Context) bool {
	return activity.IsActivity(ctx) && activity.GetInfo(ctx).Attempt > 1
}

// siteOutcome is how one site's sync within SyncSiteLeads ended.
type siteOutcome struct {
	pages, fresh        int
	more, retry, failed bool
	storeErr            error
}

// syncSite syncs one site of in and records it (RecordLeadSiteSync)
// unless its reads failed on an error a retry may fix.
func (a *Activities) syncSite(ctx context.Context, in SyncSiteLeadsInput, site SiteLeadEvents) siteOutcome {
	log := activity.GetLogger(ctx)
	sin := SyncLeadsInput{SiteID: site.SiteID, Limit: in.Limit, MaxPages: in.MaxPages, SyncKey: in.Key + "/" + site.SiteID}
	p := syncProgress{LastPageAt: a.now()}
	// Only a retried attempt can find pages of this sync stored.
	pos, err := store.LeadSyncPosition{}, error(store.ErrNotFound)
	if retried(ctx) {
		pos, err = a.store.LeadSyncPosition(ctx, site.SiteID, sin.SyncKey)
	}
	switch {
	case err == nil:
		p = syncProgress(pos) // an earlier attempt stored pages of it
	case errors.Is(err, store.ErrNotFound):
		from, err := a.store.LeadSyncFrom(ctx, site.SiteID)
		if err != nil {
			return siteOutcome{storeErr: err}
		}
		p.Resume, p.Next = from, from
	default:
		return siteOutcome{storeErr: err}
	}
	before := p
	done := p.Done
	if !done {
		p, done, err = a.readPages(ctx, sin, p, func(syncProgress) {})
	}
	o := siteOutcome{pages: p.Pages - before.Pages, fresh: p.New - before.New, more: !done}
	rec := store.LeadSiteSync{SiteID: site.SiteID, Key: sin.SyncKey, Order: in.Order, Events: site.Events, Duplicates: site.Duplicates, CaughtUp: done, At: a.now()}
	if err != nil {
		var app *temporal.ApplicationError
		if err := classify(err); !errors.As(err, &app) || !app.NonRetryable() {
			log.Warn("lead event sync of a site failed; the shard tries it again", "site_id", site.SiteID, "error", err)
			return siteOutcome{pages: o.pages, fresh: o.fresh, retry: true}
		}
		log.Warn("lead event sync of a site failed for good", "site_id", site.SiteID, "error", err)
		o.failed, o.more, rec.Error = true, false, app.Message()
	}
	if done {
		a.caughtUp(ctx)
	}
	if err := a.store.RecordLeadSiteSync(context.WithoutCancel(ctx), rec); err != nil {
		return siteOutcome{pages: o.pages, fresh: o.fresh, storeErr: err}
	}
	log.Debug("lead event sync of a site done", "site_id", site.SiteID, "pages", o.pages, "new_leads", o.fresh, "caught_up", done)
	return o
}
