package workflows

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/agentsite"
)

// Names of the onboarding workflow's messages.
const (
	OnboardingWorkflowName = "Onboarding"
	// SignalKnowledgeReady carries a knowledge.ready event (KnowledgeReadySignal).
	SignalKnowledgeReady = "knowledge-ready"
	// SignalSiteStatus carries a site.published or site.unpublished event
	// (SiteStatusSignal).
	SignalSiteStatus = "site-status"
	// QueryStatus answers the current step (OnboardingStatus).
	QueryStatus = "status"
)

// What to do when knowledge sources are not ready in time.
const (
	TimeoutFail    = "fail"
	TimeoutProceed = "proceed"
)

// Onboarding steps, as the status query reports them.
const (
	StepValidating       = "validating"
	StepCreatingSite     = "creating-site"
	StepConfiguringAgent = "configuring-agent"
	StepAddingContent    = "adding-knowledge-and-faqs"
	StepWaitingKnowledge = "waiting-for-knowledge"
	StepPublishing       = "publishing"
	StepDone             = "done"
	StepFailed           = "failed"
)

// ErrTypeInvalidSpec is the type of the failure of an onboarding whose input
// breaks the contract; its message lists every problem.
const (
	ErrTypeInvalidSpec      = "InvalidOnboardingSpec"
	ErrTypeKnowledgeTimeout = "KnowledgeNotReady"
)

// contentConcurrency bounds the knowledge and FAQ calls in flight at once.
const contentConcurrency = 8

// AgentSpec is the agent's configuration and embed policy.
type AgentSpec struct {
	DisplayName    string   `json:"display_name,omitempty"`
	PersonaMode    string   `json:"persona_mode,omitempty"`
	Instructions   string   `json:"instructions,omitempty"`
	Languages      []string `json:"languages,omitempty"`
	EmbedEnabled   bool     `json:"embed_enabled"`
	AllowedOrigins []string `json:"allowed_origins,omitempty"`
}

// KnowledgeSpec is one knowledge source: its text in the store under
// TextHash (as the starter puts it), or inline in Text when small. Chars is
// the text's length in code points.
type KnowledgeSpec struct {
	Name     string `json:"name"`
	TextHash string `json:"text_hash,omitempty"`
	Text     string `json:"text,omitempty"`
	Chars    int    `json:"chars"`
}

// OnboardingInput is everything needed to bring one customer's site live.
type OnboardingInput struct {
	Site      agentsite.NewSite `json:"site"`
	Agent     AgentSpec         `json:"agent"`
	Knowledge []KnowledgeSpec   `json:"knowledge,omitempty"`
	FAQs      []agentsite.FAQ   `json:"faqs,omitempty"`
	// WaitForKnowledge holds publishing until every source has sent
	// knowledge.ready, for at most KnowledgeTimeout (default 10m); then
	// OnKnowledgeTimeout says whether to fail (default) or publish anyway.
	WaitForKnowledge   bool     `json:"wait_for_knowledge,omitempty"`
	KnowledgeTimeout   Duration `json:"knowledge_timeout,omitempty"`
	OnKnowledgeTimeout string   `json:"on_knowledge_timeout,omitempty"`
	// SkipPublish leaves the site in draft.
	SkipPublish bool `json:"skip_publish,omitempty"`
}

// OnboardingResult is what an onboarding made.
type OnboardingResult struct {
	SiteID            string   `json:"site_id"`
	Status            string   `json:"status"`
	KnowledgeIDs      []string `json:"knowledge_ids"`
	FAQIDs            []string `json:"faq_ids"`
	KnowledgeReady    int      `json:"knowledge_ready"`
	KnowledgeTimedOut bool     `json:"knowledge_timed_out,omitempty"`
}

// KnowledgeReadySignal is a knowledge.ready event relayed to the workflow.
type KnowledgeReadySignal struct {
	EventID     string `json:"event_id"`
	KnowledgeID string `json:"knowledge_id"`
}

// SiteStatusSignal is a site.published or site.unpublished event relayed to
// the workflow.
type SiteStatusSignal struct {
	EventID string `json:"event_id"`
	Type    string `json:"type"`
	Status  string `json:"status,omitempty"`
}

// OnboardingStatus answers QueryStatus.
type OnboardingStatus struct {
	Step           string `json:"step"`
	SiteID         string `json:"site_id,omitempty"`
	KnowledgeTotal int    `json:"knowledge_total"`
	KnowledgeAdded int    `json:"knowledge_added"`
	KnowledgeReady int    `json:"knowledge_ready"`
	FAQsAdded      int    `json:"faqs_added"`
	// LastSiteEvent is the latest site.published or site.unpublished seen.
	LastSiteEvent string `json:"last_site_event,omitempty"`
	Error         string `json:"error,omitempty"`
}

// Onboarding validates the input, creates the site, configures its agent,
// adds knowledge and FAQs in parallel, optionally waits for every source to
// be processed, and publishes.
func Onboarding(ctx workflow.Context, in OnboardingInput) (OnboardingResult, error) {
	o := &onboarding{in: in, id: workflow.GetInfo(ctx).WorkflowExecution.ID, ready: map[string]bool{}, seenEvents: map[string]bool{}}
	if err := o.setup(ctx); err != nil {
		return OnboardingResult{}, err
	}
	res, err := o.run(ctx)
	if err != nil {
		o.status.Step, o.status.Error = StepFailed, err.Error()
	}
	return res, err
}

type onboarding struct {
	in         OnboardingInput
	id         string
	status     OnboardingStatus
	res        OnboardingResult
	ready      map[string]bool // knowledge ids reported ready
	seenEvents map[string]bool
}

func (o *onboarding) setup(ctx workflow.Context) error {
	o.status = OnboardingStatus{Step: StepValidating, KnowledgeTotal: len(o.in.Knowledge)}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (OnboardingStatus, error) {
		s := o.status
		s.KnowledgeReady = o.readyCount()
		return s, nil
	}); err != nil {
		return err
	}
	statusCh := workflow.GetSignalChannel(ctx, SignalSiteStatus)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var sig SiteStatusSignal
			statusCh.Receive(ctx, &sig)
			if o.seenEvents[sig.EventID] {
				continue
			}
			o.seenEvents[sig.EventID] = true
			o.status.LastSiteEvent = sig.Type
		}
	})
	ch := workflow.GetSignalChannel(ctx, SignalKnowledgeReady)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var sig KnowledgeReadySignal
			ch.Receive(ctx, &sig)
			if sig.EventID != "" && o.seenEvents[sig.EventID] {
				continue // a duplicate delivery changes nothing
			}
			o.seenEvents[sig.EventID] = true
			o.ready[sig.KnowledgeID] = true
		}
	})
	return nil
}

// readyCount counts the sources of this site that were reported ready.
// Events may arrive before the source's id is known; they count once it is.
func (o *onboarding) readyCount() int {
	n := 0
	for _, id := range o.res.KnowledgeIDs {
		if id != "" && o.ready[id] {
			n++
		}
	}
	return n
}

func (o *onboarding) run(ctx workflow.Context) (OnboardingResult, error) {
	log := workflow.GetLogger(ctx)
	if problems := o.validate(ctx); len(problems) > 0 {
		lines := make([]string, len(problems))
		for i, p := range problems {
			lines[i] = p.String()
		}
		return OnboardingResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the onboarding input breaks %d rule(s): %s", len(problems), strings.Join(lines, "; ")), ErrTypeInvalidSpec, nil)
	}
	actx := apiActivity(ctx)
	var a *activities.Activities

	o.status.Step = StepCreatingSite
	var site activities.CreateSiteResult
	createIn := activities.CreateSiteInput{WorkflowID: o.id, Site: o.in.Site}
	createIn.IdempotencyKey = Key(o.id, "create-site", fingerprint(o.in.Site))
	if err := workflow.ExecuteActivity(actx, a.CreateSite, createIn).Get(ctx, &site); err != nil {
		return OnboardingResult{}, err
	}
	o.res.SiteID, o.status.SiteID = site.SiteID, site.SiteID

	o.status.Step = StepConfiguringAgent
	update := o.agentUpdate()
	agentIn := activities.UpdateAgentInput{SiteID: site.SiteID, Update: update, IdempotencyKey: Key(o.id, "configure-agent", fingerprint(update))}
	if err := workflow.ExecuteActivity(actx, a.UpdateAgent, agentIn).Get(ctx, nil); err != nil {
		return OnboardingResult{}, err
	}

	o.status.Step = StepAddingContent
	if err := o.addContent(ctx, actx, site.SiteID); err != nil {
		return OnboardingResult{}, err
	}

	if o.in.WaitForKnowledge && len(o.in.Knowledge) > 0 {
		o.status.Step = StepWaitingKnowledge
		timeout := o.in.KnowledgeTimeout.D()
		if timeout == 0 {
			timeout = 10 * time.Minute
		}
		all, err := o.waitForKnowledge(ctx, timeout)
		if err != nil {
			return OnboardingResult{}, err
		}
		if !all {
			o.res.KnowledgeTimedOut = true
			msg := fmt.Sprintf("%d of %d knowledge sources were ready after %s", o.readyCount(), len(o.res.KnowledgeIDs), timeout)
			if o.in.OnKnowledgeTimeout != TimeoutProceed {
				return OnboardingResult{}, temporal.NewNonRetryableApplicationError(msg+"; the site was left in draft (set on_knowledge_timeout to proceed to publish anyway)", ErrTypeKnowledgeTimeout, nil)
			}
			log.Warn("publishing with knowledge not ready", "detail", msg)
		}
	}
	o.res.KnowledgeReady = o.readyCount()

	o.res.Status = site.Status
	if !o.in.SkipPublish {
		o.status.Step = StepPublishing
		var pub activities.PublishResult
		pubIn := activities.PublishInput{SiteID: site.SiteID, Published: true, IdempotencyKey: Key(o.id, "publish"),
			StartedAt: workflow.GetInfo(ctx).WorkflowStartTime}
		if err := workflow.ExecuteActivity(actx, a.Publish, pubIn).Get(ctx, &pub); err != nil {
			return OnboardingResult{}, err
		}
		o.res.Status = pub.Status
	}
	o.status.Step = StepDone
	return o.res, nil
}

// versionValidationRecorded marks onboardings whose validation is recorded
// in history: the contract's rules (package agentsite's validators) change
// with the contract, and a rule run again on replay could judge an
// onboarding in flight differently than when it started. Starters validate
// before they start (starter.Onboard, siteops onboard); this is the last
// line, recorded once.
const versionValidationRecorded = "validation-recorded"

// validate checks the input against the contract: for onboardings started
// before versionValidationRecorded in workflow code as they did, since then
// once, as a side effect whose answer history keeps.
func (o *onboarding) validate(ctx workflow.Context) []Problem {
	if workflow.GetVersion(ctx, versionValidationRecorded, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return Validate(o.in)
	}
	var problems []Problem
	enc := workflow.SideEffect(ctx, func(workflow.Context) any { return Validate(o.in) })
	if err := enc.Get(&problems); err != nil {
		return []Problem{{Field: "(input)", Message: "the validation's answer could not be read: " + err.Error()}}
	}
	return problems
}

// versionLevelTriggeredWaits marks onboardings whose wait for knowledge is
// level-triggered as well as signal-driven: they read what the inbox holds
// of their site's events before they wait and again while they wait, so
// that a knowledge.ready that came before the run listened, while no run
// did, or to an earlier run of the same ID (a second start after a success,
// under an SDK's default ID reuse policy) is never needed as a signal
// again. Onboardings started before it wait for signals alone, as they ran.
const versionLevelTriggeredWaits = "level-triggered-waits"

// How often a waiting onboarding reads the inbox: first inboxReadFirst
// after the read before it waits, then twice as long each time, up to
// inboxReadCeiling or the timeout's inboxReadsPerWait-th part, whichever
// is longer. So a wait of any length reads at most some 110 times (11
// history events each: about 1,200 for the longest wait, 7 days; some 13
// reads for the default 10 minutes), and the signal stays the fast path.
const (
	inboxReadFirst    = 5 * time.Second
	inboxReadCeiling  = time.Minute
	inboxReadsPerWait = 100
)

// waitForKnowledge waits until every source is ready or timeout passes,
// and says whether every source was ready.
func (o *onboarding) waitForKnowledge(ctx workflow.Context, timeout time.Duration) (bool, error) {
	allReady := func() bool { return o.readyCount() == len(o.res.KnowledgeIDs) }
	if workflow.GetVersion(ctx, versionLevelTriggeredWaits, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return workflow.AwaitWithTimeout(ctx, timeout, allReady)
	}
	deadline := workflow.Now(ctx).Add(timeout)
	every, ceiling := inboxReadFirst, max(inboxReadCeiling, timeout/inboxReadsPerWait)
	for {
		// A read also at the deadline: a source the inbox holds by then
		// counts as ready.
		if !allReady() {
			o.readInbox(ctx)
		}
		if allReady() {
			return true, nil
		}
		left := deadline.Sub(workflow.Now(ctx))
		if left <= 0 {
			return false, nil
		}
		if ok, err := workflow.AwaitWithTimeout(ctx, min(every, left), allReady); ok || err != nil {
			return ok, err
		}
		every = min(2*every, ceiling)
	}
}

// readInbox takes what the inbox holds of the site's events as if each had
// been signalled: the sources not yet ready that have a knowledge.ready,
// and the site's latest publication event. A read that fails is logged and
// changes nothing: the signals and the next read still count.
func (o *onboarding) readInbox(ctx workflow.Context) {
	var a *activities.Activities
	var missing []string
	for _, id := range o.res.KnowledgeIDs {
		if id != "" && !o.ready[id] {
			missing = append(missing, id)
		}
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 3},
	})
	var res activities.SiteEventsResult
	if err := workflow.ExecuteActivity(actx, a.SiteEvents, activities.SiteEventsInput{SiteID: o.res.SiteID, KnowledgeIDs: missing}).Get(ctx, &res); err != nil {
		if ctx.Err() == nil {
			workflow.GetLogger(ctx).Warn("reading the inbox for the site's events failed; waiting for their signals", "site_id", o.res.SiteID, "error", err)
		}
		return
	}
	for _, id := range res.Ready {
		o.ready[id] = true
	}
	if id := res.LastSiteEventID; id != "" && !o.seenEvents[id] {
		o.seenEvents[id] = true
		o.status.LastSiteEvent = res.LastSiteEvent
	}
}

func (o *onboarding) agentUpdate() agentsite.AgentUpdate {
	ag := o.in.Agent
	u := agentsite.AgentUpdate{EmbedEnabled: &ag.EmbedEnabled, AllowedOrigins: ag.AllowedOrigins, Languages: ag.Languages}
	if u.AllowedOrigins == nil {
		u.AllowedOrigins = []string{}
	}
	if ag.DisplayName != "" {
		u.DisplayName = &ag.DisplayName
	}
	if ag.PersonaMode != "" {
		u.PersonaMode = &ag.PersonaMode
	}
	if ag.Instructions != "" {
		u.Instructions = &ag.Instructions
	}
	return u
}

// addContent adds every knowledge source and FAQ, a bounded number at a
// time, each with its own key (its position and content).
func (o *onboarding) addContent(ctx, actx workflow.Context, siteID string) error {
	var a *activities.Activities
	nk, nf := len(o.in.Knowledge), len(o.in.FAQs)
	o.res.KnowledgeIDs = make([]string, nk)
	o.res.FAQIDs = make([]string, nf)
	return inParallel(ctx, contentConcurrency, nk+nf,
		func(i int) workflow.Future {
			if i < nk {
				k := o.in.Knowledge[i]
				in := activities.AddKnowledgeInput{SiteID: siteID, Name: k.Name, TextHash: k.TextHash, Text: k.Text}
				in.IdempotencyKey = Key(o.id, "knowledge", strconv.Itoa(i), fingerprint(k))
				return workflow.ExecuteActivity(actx, a.AddKnowledge, in)
			}
			f := o.in.FAQs[i-nk]
			in := activities.AddFAQInput{SiteID: siteID, FAQ: f, IdempotencyKey: Key(o.id, "faq", strconv.Itoa(i-nk), fingerprint(f))}
			return workflow.ExecuteActivity(actx, a.AddFAQ, in)
		},
		func(i int, f workflow.Future) error {
			if i < nk {
				var r activities.AddKnowledgeResult
				if err := f.Get(ctx, &r); err != nil {
					return err
				}
				o.res.KnowledgeIDs[i] = r.KnowledgeID
				o.status.KnowledgeAdded++
				return nil
			}
			var r activities.AddFAQResult
			if err := f.Get(ctx, &r); err != nil {
				return err
			}
			o.res.FAQIDs[i-nk] = r.FAQID
			o.status.FAQsAdded++
			return nil
		})
}
