package workflows

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/agentsite"
)

// Names of the lead sync workflow's messages.
const (
	LeadSyncWorkflowName = "LeadSync"
	// SignalLeadsCreated carries the ids of lead.created events
	// (LeadsCreatedSignal): the relay sends one per site for the events it
	// claimed together.
	SignalLeadsCreated = "leads-created"
	// SignalLeadCreated carries one lead.created event (LeadCreatedSignal);
	// still handled for senders of one event at a time.
	SignalLeadCreated = "lead-created"
	// SignalSync asks for a sync now (SyncRequest), e.g. a full re-scan.
	SignalSync = "sync"
	// QueryProgress answers LeadSyncProgress.
	QueryProgress = "progress"
)

// Defaults of a lead sync.
const (
	DefaultPageLimit    = 200
	DefaultPollInterval = 5 * time.Minute
	DefaultPagesPerRun  = 50
	DefaultStallTimeout = time.Hour
	// RecentEventsKept is how many of the latest lead.created event ids a
	// lead sync remembers, carried across continue-as-new, to count a
	// redelivered event once; the relay's route table says so to
	// operators (siteops events replay).
	RecentEventsKept       = 1000
	maxSyncsPerRun         = 200
	leadSyncHeartbeat      = 30 * time.Second
	leadSyncActivityBudget = 10 * time.Minute
	// MaxHistoryEvents is the history length at which a run continues as
	// new (or sooner, when the server suggests it): far below Temporal's
	// limit of 51,200, so that a burst of signals during one activity
	// cannot come near it.
	MaxHistoryEvents = 1_000
	// legacyMaxHistory is the bound of runs started before
	// versionBoundedHistory.
	legacyMaxHistory = 10_000
)

// versionBoundedHistory marks runs that bound their history at
// MaxHistoryEvents wherever they wait, retry a sync for as long as it makes
// progress, and take batched lead.created signals. Runs started before it
// replay as they ran.
const versionBoundedHistory = "bounded-history"

// versionCutSync marks runs that wait for the sync activity together with
// their signals and, when the history passes its bound while the activity
// runs, cancel it and continue as new from the page it had reached. Runs
// started before it wait for the activity alone, as they ran.
//
// Why cancel rather than bound each run in time as well as in pages: the
// history grows by the signals that arrive while an activity runs, and an
// activity whose attempts fail runs for as long as Temporal retries it —
// up to the stall timeout, an hour by default — so only a bound the
// workflow enforces while it waits holds under throttling, and a cancel
// loses nothing: the activity hands back the progress it has stored, and
// every page it stored is an idempotent upsert if it is read again.
const versionCutSync = "cut-sync-at-history-bound"

// versionSyncPosition marks runs whose syncs each have a key under which
// the store records the sync's position with every page it stores, in the
// page's transaction: a retried attempt, or the next run of a sync cut
// short (the run hands the key on), goes on from the first page not
// stored, whatever the heartbeat or the cancel's answer carried, so a
// cut is exact. Runs started before it keep positions in heartbeats
// alone, as they ran.
const versionSyncPosition = "sync-position-in-store"

// versionLeadSyncLimits marks runs that check their settings against the
// limits below (CheckLeadSyncLimits) and fail on a setting past them; runs
// started before it replay unchecked.
const versionLeadSyncLimits = "lead-sync-limits"

// versionLeadSweep marks runs that rely on the lead sweep (LeadSweep) as
// their safety net for a lead.created delivery that never comes: they arm
// no poll timer unless their input asks for one (PollInterval), and keep
// the one they armed across syncs until it fires, where runs before it
// armed a new 5-minute timer after every sync — three Temporal actions
// every five minutes for a site where nothing happens, and a timer per
// event. Runs started before it replay as they ran.
const versionLeadSweep = "lead-sweep"

// The bounds of a lead sync's settings. Whoever may start a workflow may
// start a lead sync with any input: without bounds a poll interval of a
// millisecond is a loop against the API and the task queue, and a page
// limit of a million a page the service refuses.
const (
	MinPollInterval = time.Minute
	MaxPollInterval = 24 * time.Hour
	MinStallTimeout = time.Minute
	MaxStallTimeout = 7 * 24 * time.Hour
	MaxPageLimit    = 200
	MaxPagesPerRun  = 1_000
	MaxSyncsPerRun  = 1_000
)

// CheckLeadSyncLimits refuses settings outside their bounds (zero is the
// default and always allowed), naming each bound. The workflow checks it
// whoever started it; a starter may check it first.
func CheckLeadSyncLimits(in LeadSyncInput) error {
	var problems []string
	durations := []struct {
		field string
		value Duration
		least time.Duration
		most  time.Duration
	}{
		{"poll_interval", in.PollInterval, MinPollInterval, MaxPollInterval},
		{"stall_timeout", in.StallTimeout, MinStallTimeout, MaxStallTimeout},
	}
	for _, d := range durations {
		if v := d.value.D(); v != 0 && (v < d.least || v > d.most) {
			problems = append(problems, fmt.Sprintf("%s is %s; it must be from %s to %s", d.field, v, d.least, d.most))
		}
	}
	counts := []struct {
		field string
		value int
		most  int
	}{
		{"page_limit", in.PageLimit, MaxPageLimit},
		{"pages_per_run", in.PagesPerRun, MaxPagesPerRun},
		{"syncs_per_run", in.SyncsPerRun, MaxSyncsPerRun},
	}
	for _, c := range counts {
		if c.value < 0 || c.value > c.most {
			problems = append(problems, fmt.Sprintf("%s is %d; it must be from 1 to %d (0 for the default)", c.field, c.value, c.most))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("lead sync refused: %s", strings.Join(problems, "; "))
	}
	return nil
}

// LeadSyncInput starts or continues a site's lead sync. The fields after
// PollInterval carry state across continue-as-new; callers leave them empty.
//
// The sync assumes what the contract implies but does not say: the lead
// collection only grows at its end and a cursor stays valid as it grows. So
// a sync resumes from the cursor of the last page it read. Full re-reads the
// whole collection first, to reconcile if that assumption ever fails.
type LeadSyncInput struct {
	SiteID       string   `json:"site_id"`
	Full         bool     `json:"full,omitempty"`
	PageLimit    int      `json:"page_limit,omitempty"`
	PollInterval Duration `json:"poll_interval,omitempty"`
	PagesPerRun  int      `json:"pages_per_run,omitempty"`
	// SyncsPerRun is how many syncs one run makes before it continues as
	// new (default 200; sooner if the server suggests it).
	SyncsPerRun int `json:"syncs_per_run,omitempty"`
	// StallTimeout is how long a sync may fail on transient errors without
	// storing a page before the workflow fails (default 1h).
	StallTimeout Duration `json:"stall_timeout,omitempty"`

	// Swept is set by runs that rely on the lead sweep (versionLeadSweep)
	// when they continue as new: their PollInterval is what the caller
	// asked, 0 for no timer. A run continued from an older one, which
	// wrote the 5-minute default into PollInterval, finds it unset and
	// takes that default for the sweep.
	Swept bool `json:"swept,omitempty"`

	Resume       *agentsite.Cursor `json:"resume,omitempty"`
	Progress     LeadSyncProgress  `json:"progress"`
	RecentEvents []string          `json:"recent_events,omitempty"`
	// StallSince is when the stall clock of a sync cut short started
	// (its last stored page), so that the next run's sync goes on with it.
	StallSince time.Time `json:"stall_since,omitzero"`
	// Cut names the sync cut short that the next run goes on with.
	Cut *SyncCut `json:"cut,omitempty"`
}

// SyncCut is a sync cut short: the key its position is stored under, and
// what the runs before already added of it to the progress, so that the
// next run adds only the rest (the activity counts a keyed sync since it
// began).
type SyncCut struct {
	Key       string `json:"key"`
	Pages     int    `json:"pages"`
	LeadsRead int    `json:"leads_read"`
	New       int    `json:"new"`
}

// LeadCreatedSignal is a lead.created event relayed to the workflow.
type LeadCreatedSignal struct {
	EventID string `json:"event_id"`
	LeadID  string `json:"lead_id,omitempty"`
}

// LeadsCreatedSignal carries the ids of lead.created events of the site.
type LeadsCreatedSignal struct {
	EventIDs []string `json:"event_ids"`
}

// SyncRequest asks a running sync to sync now.
type SyncRequest struct {
	Full bool `json:"full,omitempty"`
}

// LeadSyncProgress answers QueryProgress. LastSyncAt is omitted before
// the first sync.
type LeadSyncProgress struct {
	// Leads is how many distinct leads the sync stored; Pages and
	// LeadsRead count the pages and records it read (a page read again
	// counts again).
	Leads      int       `json:"leads"`
	Pages      int       `json:"pages"`
	LeadsRead  int       `json:"leads_read"`
	Syncs      int       `json:"syncs"`
	LastSyncAt time.Time `json:"last_sync_at,omitzero"`
	CaughtUp   bool      `json:"caught_up"`
	Syncing    bool      `json:"syncing"`
	// Events counts distinct lead.created events; DuplicateEvents the
	// deliveries of events already counted.
	Events          int `json:"events"`
	DuplicateEvents int `json:"duplicate_events"`
	Runs            int `json:"runs"`
}

// LeadSync keeps the store's copy of a site's leads up to date. Webhooks are
// triggers, the API is the truth: a lead.created event only wakes the sync,
// which then reads the collection through the cursor API. Between events it
// polls. It runs until cancelled, continuing as new before its history grows
// large.
func LeadSync(ctx workflow.Context, in LeadSyncInput) error {
	s := &leadSync{in: in}
	if err := s.setup(ctx); err != nil {
		return err
	}
	return s.run(ctx)
}

type leadSync struct {
	in       LeadSyncInput
	p        LeadSyncProgress
	recent   *recentIDs
	pending  bool // a trigger arrived since the last sync
	fullNext bool
	bounded  bool // versionBoundedHistory
	cuts     bool // versionCutSync
	swept    bool // versionLeadSweep
	// poll is the poll timer of a swept run, kept across syncs until it
	// fires; nil when none is armed.
	poll workflow.Future
	// positions is versionSyncPosition; counted is what the progress
	// already holds of the sync under way (a sync cut short by an
	// earlier run).
	positions bool
	counted   SyncCut
	leadCh    workflow.ReceiveChannel
	leadsCh   workflow.ReceiveChannel
	syncCh    workflow.ReceiveChannel
}

func (s *leadSync) setup(ctx workflow.Context) error {
	if s.in.PageLimit == 0 {
		s.in.PageLimit = DefaultPageLimit
	}
	if s.in.PagesPerRun == 0 {
		s.in.PagesPerRun = DefaultPagesPerRun
	}
	if s.in.SyncsPerRun == 0 {
		s.in.SyncsPerRun = maxSyncsPerRun
	}
	if s.in.StallTimeout == 0 {
		s.in.StallTimeout = Duration(DefaultStallTimeout)
	}
	s.p = s.in.Progress
	s.p.Runs++
	s.recent = newRecentIDs(RecentEventsKept, s.in.RecentEvents)
	s.fullNext = s.in.Full
	s.leadCh = workflow.GetSignalChannel(ctx, SignalLeadCreated)
	s.leadsCh = workflow.GetSignalChannel(ctx, SignalLeadsCreated)
	s.syncCh = workflow.GetSignalChannel(ctx, SignalSync)
	return workflow.SetQueryHandler(ctx, QueryProgress, func() (LeadSyncProgress, error) { return s.p, nil })
}

// onEvent counts one lead.created event once, however often it is
// delivered, and wakes the sync.
func (s *leadSync) onEvent(eventID string) {
	if eventID != "" && s.recent.has(eventID) {
		s.p.DuplicateEvents++
		return
	}
	s.p.Events++
	if eventID != "" {
		s.recent.remember(eventID)
	}
	s.pending = true
}

func (s *leadSync) onLeadsCreated(sig LeadsCreatedSignal) {
	for _, id := range sig.EventIDs {
		s.onEvent(id)
	}
}

func (s *leadSync) onSync(req SyncRequest) {
	s.pending = true
	s.fullNext = s.fullNext || req.Full
}

// drain takes every signal already delivered without blocking.
func (s *leadSync) drain() {
	for {
		var sig LeadCreatedSignal
		if !s.leadCh.ReceiveAsync(&sig) {
			break
		}
		s.onEvent(sig.EventID)
	}
	for {
		var sig LeadsCreatedSignal
		if !s.leadsCh.ReceiveAsync(&sig) {
			break
		}
		s.onLeadsCreated(sig)
	}
	for {
		var req SyncRequest
		if !s.syncCh.ReceiveAsync(&req) {
			break
		}
		s.onSync(req)
	}
}

func (s *leadSync) run(ctx workflow.Context) error {
	if workflow.GetVersion(ctx, versionLeadSyncLimits, workflow.DefaultVersion, 1) == 1 {
		if err := CheckLeadSyncLimits(s.in); err != nil {
			workflow.GetLogger(ctx).Warn("lead sync refused", "site_id", s.in.SiteID, "error", err)
			return temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrTypePolicy, nil)
		}
	}
	s.bounded = workflow.GetVersion(ctx, versionBoundedHistory, workflow.DefaultVersion, 1) == 1
	// Only bounded runs ask, so that a run that predates both records no
	// marker for this change.
	s.cuts = s.bounded && workflow.GetVersion(ctx, versionCutSync, workflow.DefaultVersion, 1) == 1
	s.positions = s.cuts && workflow.GetVersion(ctx, versionSyncPosition, workflow.DefaultVersion, 1) == 1
	// The sweep checks sites by the position keyed syncs store.
	s.swept = s.positions && workflow.GetVersion(ctx, versionLeadSweep, workflow.DefaultVersion, 1) == 1
	switch {
	case !s.swept && s.in.PollInterval == 0:
		s.in.PollInterval = Duration(DefaultPollInterval)
	case s.swept && !s.in.Swept && s.in.Progress.Runs > 0 && s.in.PollInterval.D() == DefaultPollInterval:
		// Continued from a run before the sweep, which wrote its default
		// here: the sweep replaces it.
		s.in.PollInterval = 0
	}
	s.in.Swept = s.swept
	policy := &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    time.Minute,
		MaximumAttempts:    20,
	}
	if s.bounded {
		// Attempts are unlimited: the activity fails for good on errors no
		// retry can fix, or when no page was stored for the stall timeout.
		policy.MaximumAttempts = 0
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: leadSyncActivityBudget,
		HeartbeatTimeout:    leadSyncHeartbeat,
		RetryPolicy:         policy,
		// A run that cuts its sync short waits for the activity's answer,
		// which carries the progress it stored.
		WaitForCancellation: s.cuts,
	})
	for syncs := 0; ; syncs++ {
		s.drain()
		if s.bounded && syncs > 0 && s.historyFull(ctx) {
			return s.continueAsNew(ctx)
		}
		s.pending = false
		from, full := s.in.Resume, s.fullNext
		if s.fullNext {
			from, s.fullNext = nil, false
		}
		key := s.syncKey(ctx, syncs, full)
		s.p.Syncing = true
		in := activities.SyncLeadsInput{
			SiteID: s.in.SiteID, From: from, Limit: s.in.PageLimit, MaxPages: s.in.PagesPerRun,
			StallTimeout: s.in.StallTimeout.D(), StallSince: s.in.StallSince, SyncKey: key,
		}
		res, cut, err := s.sync(ctx, actx, in)
		s.p.Syncing = false
		if err != nil {
			return err
		}
		s.in.Resume = res.Resume
		// A keyed sync's counts are the sync's since it began: add what
		// the progress does not hold yet.
		s.p.Pages += res.Pages - s.counted.Pages
		s.p.LeadsRead += res.Leads - s.counted.LeadsRead
		if res.Stored != nil {
			// The store's count: right whatever attempts re-read or a
			// lost heartbeat forgot.
			s.p.Leads = *res.Stored
		} else {
			s.p.Leads += res.New - s.counted.New
		}
		if cut {
			s.in.StallSince = res.LastPageAt
			if key != "" {
				s.in.Cut = &SyncCut{Key: key, Pages: res.Pages, LeadsRead: res.Leads, New: res.New}
			}
			s.pending = true // the next run goes on with the sync
			s.drain()
			return s.continueAsNew(ctx)
		}
		s.in.StallSince = time.Time{}
		s.p.Syncs++
		s.p.LastSyncAt = workflow.Now(ctx)
		s.p.CaughtUp = res.CaughtUp

		if s.historyFull(ctx) || syncs+1 >= s.in.SyncsPerRun {
			s.drain()
			return s.continueAsNew(ctx)
		}
		if !res.CaughtUp {
			continue // more pages: the budget only bounds one activity run
		}
		s.wait(ctx)
		if s.swept && ctx.Err() != nil {
			return ctx.Err() // cancelled while it waited
		}
	}
}

// syncKey names the sync about to start (number syncs of this run) and
// sets what the progress already holds of it: the sync cut short that
// this run goes on with, unless a full re-scan replaces it, or a new sync
// of this run. Runs before versionSyncPosition have no keys.
func (s *leadSync) syncKey(ctx workflow.Context, syncs int, full bool) string {
	cut := s.in.Cut
	s.in.Cut, s.counted = nil, SyncCut{}
	if !s.positions {
		return ""
	}
	if cut != nil && !full {
		s.counted = *cut
		return cut.Key
	}
	info := workflow.GetInfo(ctx)
	return Key(info.WorkflowExecution.ID, info.WorkflowExecution.RunID, "sync", strconv.Itoa(syncs))
}

// sync runs one SyncLeads activity. Runs with versionCutSync wait for it
// together with their signals, so that the history bound is checked as
// each signal arrives; when it is passed, they cancel the activity and
// report the sync cut short (cut), with the progress the activity
// stored.
func (s *leadSync) sync(ctx, actx workflow.Context, in activities.SyncLeadsInput) (res activities.SyncLeadsResult, cut bool, err error) {
	var a *activities.Activities
	if !s.cuts {
		err = workflow.ExecuteActivity(actx, a.SyncLeads, in).Get(ctx, &res)
		return res, false, err
	}
	started := workflow.Now(ctx)
	actx, cancel := workflow.WithCancel(actx)
	defer cancel()
	f := workflow.ExecuteActivity(actx, a.SyncLeads, in)
	for !f.IsReady() {
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(f, func(workflow.Future) {})
		s.addSignals(ctx, sel)
		sel.Select(ctx)
		if !cut && !f.IsReady() && s.historyFull(ctx) {
			workflow.GetLogger(ctx).Info("lead sync history full while syncing; cutting the sync short", "site_id", s.in.SiteID,
				"history_length", workflow.GetInfo(ctx).GetCurrentHistoryLength())
			cut = true
			cancel()
		}
	}
	err = f.Get(ctx, &res)
	if err == nil || !cut || ctx.Err() != nil {
		// Done before the cancel reached it, or not cut: as it came. (A
		// finished sync that was cut continues as new after it anyway.)
		return res, false, err
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.NonRetryable() {
		return res, false, err // it failed for good before it saw the cancel
	}
	res = activities.SyncLeadsResult{}
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) || !canceled.HasDetails() || canceled.Details(&res) != nil {
		// Cancelled between attempts (the server answers for an activity
		// waiting to be retried, without its progress), or an attempt
		// that failed once the cancel was asked, which Temporal does not
		// retry: go on from where this sync began, reading again at worst
		// the pages it stored, with the stall clock it began with. That
		// clock never runs late, so a sync that keeps being cut during an
		// outage still stalls out; it runs early only if the attempts it
		// could not report stored pages.
		res = activities.SyncLeadsResult{Resume: in.From, LastPageAt: in.StallSince}
		if res.LastPageAt.IsZero() {
			res.LastPageAt = started
		}
		// A keyed sync's next run goes on from the store's position, and
		// its counts are the sync's: this run adds nothing of it.
		res.Pages, res.Leads, res.New = s.counted.Pages, s.counted.LeadsRead, s.counted.New
	}
	return res, true, nil
}

// addSignals adds the run's signal channels to sel.
func (s *leadSync) addSignals(ctx workflow.Context, sel workflow.Selector) {
	sel.AddReceive(s.leadCh, func(c workflow.ReceiveChannel, _ bool) {
		var sig LeadCreatedSignal
		c.Receive(ctx, &sig)
		s.onEvent(sig.EventID)
	})
	sel.AddReceive(s.leadsCh, func(c workflow.ReceiveChannel, _ bool) {
		var sig LeadsCreatedSignal
		c.Receive(ctx, &sig)
		s.onLeadsCreated(sig)
	})
	sel.AddReceive(s.syncCh, func(c workflow.ReceiveChannel, _ bool) {
		var req SyncRequest
		c.Receive(ctx, &req)
		s.onSync(req)
	})
}

// wait blocks until a new lead.created event, a sync request, or the poll
// interval — or, in bounded runs, until the history is full, so that the
// run continues as new instead of growing while it waits.
func (s *leadSync) wait(ctx workflow.Context) {
	s.drain()
	if s.pending {
		return
	}
	if s.swept {
		s.waitSwept(ctx)
		return
	}
	timerCtx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timer := workflow.NewTimer(timerCtx, s.in.PollInterval.D())
	for !s.pending {
		sel := workflow.NewSelector(ctx)
		s.addSignals(ctx, sel)
		fired := false
		sel.AddFuture(timer, func(workflow.Future) { fired = true })
		sel.Select(ctx)
		if fired || (s.bounded && s.historyFull(ctx)) {
			return
		}
	}
}

// waitSwept is wait for runs that rely on the lead sweep: it arms the
// poll timer only when the input asks for one, and only when none is
// pending, so that a run waiting between events starts no timer per
// event; a timer that fired during the sync just made is spent.
func (s *leadSync) waitSwept(ctx workflow.Context) {
	if s.poll != nil && s.poll.IsReady() {
		s.poll = nil
	}
	if s.poll == nil && s.in.PollInterval != 0 {
		s.poll = workflow.NewTimer(ctx, s.in.PollInterval.D())
	}
	for !s.pending {
		sel := workflow.NewSelector(ctx)
		s.addSignals(ctx, sel)
		fired := false
		if s.poll != nil {
			sel.AddFuture(s.poll, func(workflow.Future) { fired = true })
		}
		// Without a timer nothing else ends the wait when the run is
		// cancelled.
		sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
		sel.Select(ctx)
		if ctx.Err() != nil {
			return
		}
		if fired {
			s.poll = nil
			return
		}
		if s.historyFull(ctx) {
			return
		}
	}
}

// historyFull says whether the run should continue as new now.
func (s *leadSync) historyFull(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	limit := legacyMaxHistory
	if s.bounded {
		limit = MaxHistoryEvents
	}
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > limit
}

func (s *leadSync) continueAsNew(ctx workflow.Context) error {
	next := s.in
	next.Full = s.fullNext
	next.Progress = s.p
	next.RecentEvents = s.recent.ids()
	workflow.GetLogger(ctx).Info("lead sync continuing as new", "site_id", s.in.SiteID, "leads", s.p.Leads, "pending", s.pending)
	return workflow.NewContinueAsNewError(ctx, LeadSyncWorkflowName, next)
}
