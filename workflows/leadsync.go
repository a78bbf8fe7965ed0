package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/agentsite"
)

// Names of the lead sync workflow's messages.
const (
	LeadSyncWorkflowName = "LeadSync"
	// SignalLeadCreated carries a lead.created event (LeadCreatedSignal).
	SignalLeadCreated = "lead-created"
	// SignalSync asks for a sync now (SyncRequest), e.g. a full re-scan.
	SignalSync = "sync"
	// QueryProgress answers LeadSyncProgress.
	QueryProgress = "progress"
)

// Defaults of a lead sync.
const (
	DefaultPageLimit       = 200
	DefaultPollInterval    = 5 * time.Minute
	DefaultPagesPerRun     = 50
	recentEventsKept       = 1000
	maxSyncsPerRun         = 200
	maxHistoryBeforeRenew  = 10_000
	leadSyncHeartbeat      = 30 * time.Second
	leadSyncActivityBudget = 10 * time.Minute
)

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

	Resume       *agentsite.Cursor `json:"resume,omitempty"`
	Progress     LeadSyncProgress  `json:"progress"`
	RecentEvents []string          `json:"recent_events,omitempty"`
}

// LeadCreatedSignal is a lead.created event relayed to the workflow.
type LeadCreatedSignal struct {
	EventID string `json:"event_id"`
	LeadID  string `json:"lead_id,omitempty"`
}

// SyncRequest asks a running sync to sync now.
type SyncRequest struct {
	Full bool `json:"full,omitempty"`
}

// LeadSyncProgress answers QueryProgress.
type LeadSyncProgress struct {
	Pages           int       `json:"pages"`
	Leads           int       `json:"leads"`
	Syncs           int       `json:"syncs"`
	LastSyncAt      time.Time `json:"last_sync_at"`
	CaughtUp        bool      `json:"caught_up"`
	Syncing         bool      `json:"syncing"`
	Events          int       `json:"events"`
	DuplicateEvents int       `json:"duplicate_events"`
	Runs            int       `json:"runs"`
}

// LeadSync keeps the store's copy of a site's leads up to date. Webhooks are
// triggers, the API is the truth: a lead.created event only wakes the sync,
// which then reads the collection through the cursor API. Between events it
// polls. It runs until cancelled, continuing as new before its history grows
// large.
func LeadSync(ctx workflow.Context, in LeadSyncInput) error {
	s := &leadSync{in: in, seen: map[string]bool{}}
	if err := s.setup(ctx); err != nil {
		return err
	}
	return s.run(ctx)
}

type leadSync struct {
	in       LeadSyncInput
	p        LeadSyncProgress
	seen     map[string]bool
	recent   []string
	pending  bool // a trigger arrived since the last sync
	fullNext bool
	leadCh   workflow.ReceiveChannel
	syncCh   workflow.ReceiveChannel
}

func (s *leadSync) setup(ctx workflow.Context) error {
	if s.in.PageLimit == 0 {
		s.in.PageLimit = DefaultPageLimit
	}
	if s.in.PollInterval == 0 {
		s.in.PollInterval = Duration(DefaultPollInterval)
	}
	if s.in.PagesPerRun == 0 {
		s.in.PagesPerRun = DefaultPagesPerRun
	}
	if s.in.SyncsPerRun == 0 {
		s.in.SyncsPerRun = maxSyncsPerRun
	}
	s.p = s.in.Progress
	s.p.Runs++
	for _, id := range s.in.RecentEvents {
		s.remember(id)
	}
	s.fullNext = s.in.Full
	s.leadCh = workflow.GetSignalChannel(ctx, SignalLeadCreated)
	s.syncCh = workflow.GetSignalChannel(ctx, SignalSync)
	return workflow.SetQueryHandler(ctx, QueryProgress, func() (LeadSyncProgress, error) { return s.p, nil })
}

func (s *leadSync) remember(id string) {
	s.seen[id] = true
	s.recent = append(s.recent, id)
	if len(s.recent) > recentEventsKept {
		delete(s.seen, s.recent[0])
		s.recent = s.recent[1:]
	}
}

func (s *leadSync) onLeadCreated(sig LeadCreatedSignal) {
	s.p.Events++
	if sig.EventID != "" && s.seen[sig.EventID] {
		s.p.DuplicateEvents++
		return
	}
	if sig.EventID != "" {
		s.remember(sig.EventID)
	}
	s.pending = true
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
		s.onLeadCreated(sig)
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
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: leadSyncActivityBudget,
		HeartbeatTimeout:    leadSyncHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    20,
		},
	})
	var a *activities.Activities
	for syncs := 0; ; syncs++ {
		s.drain()
		s.pending = false
		from := s.in.Resume
		if s.fullNext {
			from, s.fullNext = nil, false
		}
		s.p.Syncing = true
		var res activities.SyncLeadsResult
		err := workflow.ExecuteActivity(actx, a.SyncLeads, activities.SyncLeadsInput{
			SiteID: s.in.SiteID, From: from, Limit: s.in.PageLimit, MaxPages: s.in.PagesPerRun,
		}).Get(ctx, &res)
		s.p.Syncing = false
		if err != nil {
			return err
		}
		s.in.Resume = res.Resume
		s.p.Pages += res.Pages
		s.p.Leads += res.Leads
		s.p.Syncs++
		s.p.LastSyncAt = workflow.Now(ctx)
		s.p.CaughtUp = res.CaughtUp

		if s.shouldRenew(ctx, syncs) {
			s.drain()
			return s.continueAsNew(ctx)
		}
		if !res.CaughtUp {
			continue // more pages: the budget only bounds one activity run
		}
		s.wait(ctx)
	}
}

// wait blocks until a new lead.created event, a sync request, or the poll
// interval.
func (s *leadSync) wait(ctx workflow.Context) {
	s.drain()
	if s.pending {
		return
	}
	timerCtx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timer := workflow.NewTimer(timerCtx, s.in.PollInterval.D())
	for !s.pending {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(s.leadCh, func(c workflow.ReceiveChannel, _ bool) {
			var sig LeadCreatedSignal
			c.Receive(ctx, &sig)
			s.onLeadCreated(sig)
		})
		sel.AddReceive(s.syncCh, func(c workflow.ReceiveChannel, _ bool) {
			var req SyncRequest
			c.Receive(ctx, &req)
			s.onSync(req)
		})
		fired := false
		sel.AddFuture(timer, func(workflow.Future) { fired = true })
		sel.Select(ctx)
		if fired {
			return
		}
	}
}

func (s *leadSync) shouldRenew(ctx workflow.Context, syncs int) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > maxHistoryBeforeRenew || syncs+1 >= s.in.SyncsPerRun
}

func (s *leadSync) continueAsNew(ctx workflow.Context) error {
	next := s.in
	next.Full = s.fullNext
	next.Progress = s.p
	next.RecentEvents = append([]string(nil), s.recent...)
	workflow.GetLogger(ctx).Info("lead sync continuing as new", "site_id", s.in.SiteID, "leads", s.p.Leads, "pending", s.pending)
	return workflow.NewContinueAsNewError(ctx, LeadSyncWorkflowName, next)
}
