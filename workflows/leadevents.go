package workflows

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/activities"
)

// Names of the lead event shards.
const (
	LeadEventsWorkflowName = "LeadEvents"
	// SignalSiteLeads carries lead.created events of many sites
	// (SiteLeadsSignal): the relay sends one per shard for the events it
	// claimed together, and the lead sweep one per site it found missing
	// leads that has no lead sync of its own.
	SignalSiteLeads = "site-leads"
	// QueryLeadEvents answers LeadEventsStatus.
	QueryLeadEvents = "status"
)

// Bounds of a shard's work.
const (
	// MaxLeadShards bounds SITEOPS_LEAD_SHARDS.
	MaxLeadShards = 256
	// shardSitesPerSync is how many sites one SyncSiteLeads reads.
	shardSitesPerSync = 200
	// shardPagesPerSite is how many pages of a site one SyncSiteLeads
	// reads before the site waits for the shard's next sync: a site with
	// a long backlog does not hold the others back.
	shardPagesPerSite = 10
	// shardRetryMost is the longest a site whose reads fail waits before
	// it is tried again.
	shardRetryMost = time.Minute
	// shardSyncBudget bounds one SyncSiteLeads with its retries. The
	// relay signals a shard at most once a coalescing interval (1 s), so
	// the history grows by a few thousand events at most while it runs.
	shardSyncBudget = 30 * time.Minute
	// ShardEventsKept is how many of the latest lead.created event ids a
	// shard remembers, carried across continue-as-new, to count a
	// redelivered event once: its sites share them.
	ShardEventsKept = 5_000
)

// LeadShardKey is the shard of a site among shards (the key of its
// LeadEvents workflow's ID): the same for a site in every process with
// the same count. A site synced by two shards (a count changed under
// running shards) is still synced right: every page is an idempotent
// upsert and every sync starts where the store says the last one stopped.
func LeadShardKey(siteID string, shards int) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(siteID))
	return strconv.Itoa(int(h.Sum32() % uint32(max(shards, 1)))) //nolint:gosec // shards ≤ MaxLeadShards
}

// SiteLeadsSignal carries lead.created events of many sites.
type SiteLeadsSignal struct {
	Sites []SiteEvents `json:"sites"`
}

// SiteEvents is one site's lead.created events; no event ids asks for a
// sync alone (the lead sweep's).
type SiteEvents struct {
	SiteID   string   `json:"site_id"`
	EventIDs []string `json:"event_ids,omitempty"`
}

// LeadEventsInput starts a shard; its fields carry the shard's state
// across continue-as-new, and the relay's start leaves them empty.
type LeadEventsInput struct {
	Shard        string           `json:"shard"`
	Pending      []PendingSite    `json:"pending,omitempty"`
	RecentEvents []string         `json:"recent_events,omitempty"`
	Status       LeadEventsStatus `json:"status"`
}

// PendingSite is a site the shard has yet to sync, with the events that
// woke it and, when its reads failed, when to try it again.
type PendingSite struct {
	activities.SiteLeadEvents
	Failures     int       `json:"failures,omitempty"`
	FailingSince time.Time `json:"failing_since,omitzero"`
	NotBefore    time.Time `json:"not_before,omitzero"`
}

// LeadEventsStatus answers QueryLeadEvents.
type LeadEventsStatus struct {
	// Events counts distinct lead.created events; DuplicateEvents the
	// deliveries of events already counted (the last ShardEventsKept).
	Events          int `json:"events"`
	DuplicateEvents int `json:"duplicate_events"`
	// Syncs counts SyncSiteLeads runs, SiteSyncs the sites they read to
	// the end.
	Syncs     int `json:"syncs"`
	SiteSyncs int `json:"site_syncs"`
	// Pending is how many sites wait for a sync, Retrying how many of
	// them after reads that failed; Failed counts sites no retry could
	// sync, GaveUp sites whose reads failed for DefaultStallTimeout (the
	// lead sweep finds them again).
	Pending    int       `json:"pending"`
	Retrying   int       `json:"retrying"`
	Failed     int       `json:"failed"`
	GaveUp     int       `json:"gave_up"`
	Syncing    bool      `json:"syncing"`
	LastSyncAt time.Time `json:"last_sync_at,omitzero"`
	Runs       int       `json:"runs"`
}

// Summary implements Status.
func (s *LeadEventsStatus) Summary() []string {
	state := "waiting for lead.created events"
	if s.Syncing {
		state = "syncing"
	}
	return []string{fmt.Sprintf("%s: %d event(s) (%d duplicate deliveries), %d sync(s) of %d site(s); %d site(s) pending, %d retrying, %d failed, %d given up",
		state, s.Events, s.DuplicateEvents, s.Syncs, s.SiteSyncs, s.Pending, s.Retrying, s.Failed, s.GaveUp)}
}

// LeadEvents is a lead event shard: it syncs the leads of the sites whose
// lead.created events reach it, many sites with one SyncSiteLeads, so
// that an event costs a fraction of a signal and of an activity where a
// lead sync per site costs one of each. Each site's sync starts where the
// store says its last one stopped, whoever ran it, so a site may also
// have a LeadSync of its own (a full re-scan, a poll interval). A site
// whose reads fail waits, with backoff, without holding the others back.
// The shard runs until cancelled, continuing as new before its history
// grows large.
func LeadEvents(ctx workflow.Context, in LeadEventsInput) error {
	s := &shard{in: in, st: in.Status, recent: newRecentIDs(ShardEventsKept, in.RecentEvents), index: map[string]int{}}
	s.st.Runs++
	for _, p := range in.Pending {
		s.add(p)
	}
	s.ch = workflow.GetSignalChannel(ctx, SignalSiteLeads)
	if err := workflow.SetQueryHandler(ctx, QueryLeadEvents, func() (LeadEventsStatus, error) { return s.status(), nil }); err != nil {
		return err
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: leadSyncActivityBudget,
		HeartbeatTimeout:    leadSyncHeartbeat,
		// The activity fails only when the store cannot be reached: retry
		// it, from each site's stored position, for at most
		// shardSyncBudget; then its sites wait with backoff, and the run
		// may continue as new: the signals that came meanwhile bound its
		// history.
		ScheduleToCloseTimeout: shardSyncBudget,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
	})
	for n := 0; ; n++ {
		s.drain()
		if s.historyFull(ctx) {
			return s.continueAsNew(ctx)
		}
		batch := s.ready(workflow.Now(ctx))
		if len(batch) == 0 {
			s.wait(ctx)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		if err := s.sync(ctx, actx, n, batch); err != nil {
			return err
		}
	}
}

type shard struct {
	in      LeadEventsInput
	st      LeadEventsStatus
	recent  *recentIDs
	pending []PendingSite
	index   map[string]int // site → its place in pending
	ch      workflow.ReceiveChannel
	// timer wakes the shard for the earliest site to retry; kept until
	// it fires, so that waiting costs no timer per signal.
	timer workflow.Future
}

// add puts a site in pending, or merges it into the entry it has there,
// keeping the later retry time and the longer run of failures: a site
// that keeps failing waits out its backoff however many events come.
func (s *shard) add(p PendingSite) {
	if i, ok := s.index[p.SiteID]; ok {
		q := &s.pending[i]
		q.Events += p.Events
		q.Duplicates += p.Duplicates
		q.Failures = max(q.Failures, p.Failures)
		if p.NotBefore.After(q.NotBefore) {
			q.NotBefore = p.NotBefore
		}
		if !p.FailingSince.IsZero() && (q.FailingSince.IsZero() || p.FailingSince.Before(q.FailingSince)) {
			q.FailingSince = p.FailingSince
		}
		return
	}
	s.index[p.SiteID] = len(s.pending)
	s.pending = append(s.pending, p)
}

func (s *shard) onSignal(sig SiteLeadsSignal) {
	for _, site := range sig.Sites {
		if site.SiteID == "" {
			continue
		}
		p := PendingSite{SiteLeadEvents: activities.SiteLeadEvents{SiteID: site.SiteID}}
		for _, id := range site.EventIDs {
			if s.recent.has(id) {
				p.Duplicates++
				continue
			}
			s.recent.remember(id)
			p.Events++
		}
		s.st.Events += p.Events
		s.st.DuplicateEvents += p.Duplicates
		s.add(p)
	}
}

func (s *shard) drain() {
	var sig SiteLeadsSignal
	for s.ch.ReceiveAsync(&sig) {
		s.onSignal(sig)
		sig = SiteLeadsSignal{}
	}
}

// addSignal adds the shard's signal channel to sel.
func (s *shard) addSignal(ctx workflow.Context, sel workflow.Selector) {
	sel.AddReceive(s.ch, func(c workflow.ReceiveChannel, _ bool) {
		var sig SiteLeadsSignal
		c.Receive(ctx, &sig)
		s.onSignal(sig)
	})
}

// ready takes out of pending the sites to sync now, in the order they
// came, at most shardSitesPerSync.
func (s *shard) ready(now time.Time) []PendingSite {
	var batch, rest []PendingSite
	for _, p := range s.pending {
		if len(batch) < shardSitesPerSync && !p.NotBefore.After(now) {
			batch = append(batch, p)
			continue
		}
		rest = append(rest, p)
	}
	s.pending = nil
	clear(s.index)
	for _, p := range rest {
		s.add(p)
	}
	return batch
}

// wait blocks until a signal, the earliest retry's time, the history's
// bound or a cancel.
func (s *shard) wait(ctx workflow.Context) {
	if s.timer != nil && s.timer.IsReady() {
		s.timer = nil
	}
	if s.timer == nil {
		var first time.Time
		for _, p := range s.pending {
			if first.IsZero() || p.NotBefore.Before(first) {
				first = p.NotBefore
			}
		}
		if !first.IsZero() {
			s.timer = workflow.NewTimer(ctx, max(first.Sub(workflow.Now(ctx)), time.Second))
		}
	}
	sel := workflow.NewSelector(ctx)
	s.addSignal(ctx, sel)
	if s.timer != nil {
		sel.AddFuture(s.timer, func(workflow.Future) { s.timer = nil })
	}
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
	sel.Select(ctx)
}

// sync runs SyncSiteLeads for batch, taking signals while it runs, and
// puts back in pending the sites it did not finish.
func (s *shard) sync(ctx, actx workflow.Context, n int, batch []PendingSite) error {
	info := workflow.GetInfo(ctx)
	in := activities.SyncSiteLeadsInput{
		Key:   Key(info.WorkflowExecution.ID, info.WorkflowExecution.RunID, "sync", strconv.Itoa(n)),
		Order: workflow.Now(ctx).UnixMilli(),
		Sites: make([]activities.SiteLeadEvents, len(batch)),
		Limit: DefaultPageLimit, MaxPages: shardPagesPerSite,
	}
	for i, p := range batch {
		in.Sites[i] = p.SiteLeadEvents
	}
	s.st.Syncing = true
	var a *activities.Activities
	f := workflow.ExecuteActivity(actx, a.SyncSiteLeads, in)
	for !f.IsReady() {
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(f, func(workflow.Future) {})
		s.addSignal(ctx, sel)
		sel.Select(ctx)
	}
	s.st.Syncing = false
	var res activities.SyncSiteLeadsResult
	if err := f.Get(ctx, &res); err != nil {
		if ctx.Err() != nil {
			return err
		}
		// Retried until it failed for good: try every site again later.
		workflow.GetLogger(ctx).Warn("lead event sync failed; its sites are tried again", "shard", s.in.Shard, "sites", len(batch), "error", err)
		res = activities.SyncSiteLeadsResult{}
		for _, p := range batch {
			res.Retry = append(res.Retry, p.SiteID)
		}
	}
	now := workflow.Now(ctx)
	s.st.Syncs++
	s.st.SiteSyncs += res.Synced
	s.st.Failed += len(res.Failed)
	s.st.LastSyncAt = now
	bySite := make(map[string]PendingSite, len(batch))
	for _, p := range batch {
		bySite[p.SiteID] = p
	}
	for _, id := range res.More {
		// Its events are counted: it goes on at the next sync.
		s.add(PendingSite{SiteLeadEvents: activities.SiteLeadEvents{SiteID: id}})
	}
	for _, id := range res.Retry {
		p := bySite[id]
		if p.FailingSince.IsZero() {
			p.FailingSince = now
		}
		if now.Sub(p.FailingSince) >= DefaultStallTimeout {
			s.st.GaveUp++
			workflow.GetLogger(ctx).Warn("lead event sync of a site failed for the stall timeout; the lead sweep finds its leads later", "site_id", id, "failures", p.Failures)
			continue
		}
		p.Failures++
		p.NotBefore = now.Add(min(time.Second<<min(p.Failures, 16), shardRetryMost))
		s.add(p)
	}
	return nil
}

func (s *shard) status() LeadEventsStatus {
	st := s.st
	st.Pending = len(s.pending)
	st.Retrying = 0
	for _, p := range s.pending {
		if p.Failures > 0 {
			st.Retrying++
		}
	}
	return st
}

func (s *shard) historyFull(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > MaxHistoryEvents
}

func (s *shard) continueAsNew(ctx workflow.Context) error {
	next := LeadEventsInput{Shard: s.in.Shard, Pending: s.pending, RecentEvents: s.recent.ids(), Status: s.status()}
	return workflow.NewContinueAsNewError(ctx, LeadEventsWorkflowName, next)
}
