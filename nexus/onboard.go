package nexus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	nexusrpc "github.com/nexus-rpc/sdk-go/nexus"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/temporalnexus"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// storeKnowledge stores a text for its caller, within the caller's quota,
// and names it by its hash; the text enters no history of siteops'.
func (s *Service) storeKnowledge(ctx context.Context, in api.StoreKnowledgeInput, opts nexusrpc.StartOperationOptions) (api.StoreKnowledgeOutput, error) {
	n := utf8.RuneCountInString(in.Text)
	switch {
	case !utf8.ValidString(in.Text):
		return api.StoreKnowledgeOutput{}, badInput("text: is not valid UTF-8")
	case n < agentsite.MinKnowledgeText || n > agentsite.MaxKnowledgeText:
		return api.StoreKnowledgeOutput{}, badInput("text: is %d characters; it must be %d to %d characters", n, agentsite.MinKnowledgeText, agentsite.MaxKnowledgeText)
	}
	caller := callerOf(ctx, opts.Header, opts.Links, opts.RequestID)
	hash, err := s.putText(ctx, caller, api.StoreKnowledgeName, in.Text)
	if err != nil {
		return api.StoreKnowledgeOutput{}, err
	}
	return api.StoreKnowledgeOutput{TextHash: hash, Chars: n}, nil
}

// putText stores a caller's text within its quota; a text past it is
// refused, and logged with the caller.
func (s *Service) putText(ctx context.Context, caller Caller, op, text string) (string, error) {
	q, setting := s.o.Quota, "SITEOPS_NEXUS_TEXT_QUOTA"
	if !caller.Identified() {
		q.PerOwner, setting = s.o.SharedTextQuota, "SITEOPS_NEXUS_SHARED_TEXT_QUOTA"
	}
	hash, err := s.o.Texts.PutKnowledgeTextAs(ctx, caller.Key(), text, q)
	if errors.Is(err, store.ErrQuotaExceeded) {
		s.o.Logger.Warn("nexus request refused: knowledge text quota", "operation", op, "caller", caller, "error", err)
		msg := fmt.Sprintf("%v; texts no onboarding used for the retention period are purged, or ask siteops' operators for a larger quota (%s, or SITEOPS_NEXUS_TEXT_TOTAL for every caller's together)", err, setting)
		if !caller.Identified() {
			msg += unidentifiedHint
		}
		return "", refused(nexusrpc.HandlerErrorTypeResourceExhausted, api.ErrTypeQuotaExceeded, msg)
	}
	return hash, err
}

// unidentifiedHint ends the refusals of a request without an endpoint.
const unidentifiedHint = "; requests that no Nexus endpoint names (Temporal before 1.30, or plain HTTP to the task queue's route) share this one bucket: a partner calling through an endpoint of its own on Temporal 1.30 or later has its own"

// storeTexts stores a prepared onboarding's inline texts for its caller.
func (s *Service) storeTexts(ctx context.Context, caller Caller, texts map[string]string) error {
	for hash, text := range texts {
		got, err := s.putText(ctx, caller, api.OnboardName, text)
		if err != nil {
			return err
		}
		if got != hash {
			return fmt.Errorf("nexus: the store named a text %s, not %s", got, hash)
		}
	}
	return nil
}

// maxRunning is how many onboardings the caller may have running, and the
// setting that says so; zero is no limit.
func (s *Service) maxRunning(caller Caller) (int, string) {
	if caller.Identified() {
		return s.o.MaxRunning, "SITEOPS_NEXUS_MAX_RUNNING_ONBOARDINGS"
	}
	return s.o.SharedMaxRunning, "SITEOPS_NEXUS_SHARED_MAX_RUNNING_ONBOARDINGS"
}

// admit decides whether an onboard request of caller for workflow id may
// start a new onboarding, within the caller's running onboardings. A
// request that joins the slug's running onboarding, or is answered by its
// finished one (or refused as a different spec), starts nothing and is
// never refused here. done ends the caller's turn once the request tried
// to start (with the workflow ID it started, or "").
func (s *Service) admit(ctx context.Context, v visibility, caller Caller, id string) (done func(started string), err error) {
	none := func(string) {}
	limit, setting := s.maxRunning(caller)
	if limit == 0 {
		return none, nil
	}
	d, err := v.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
	case err != nil:
		return nil, err
	default:
		switch d.GetWorkflowExecutionInfo().GetStatus() {
		case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
			return none, nil
		}
	}
	done, n, err := s.running.admit(ctx, v, caller.Key(), limit)
	switch {
	case errors.Is(err, errTooManyRunning):
		s.o.Logger.Warn("nexus request refused: running onboardings", "operation", api.OnboardName, "caller", caller, "running", n, "limit", limit)
		who := "this caller has"
		if !caller.Identified() {
			who = "requests that no Nexus endpoint names have"
		}
		msg := fmt.Sprintf("%s %d onboardings running, the most %s allows (%d); nothing started: try %s again once one of them has ended, or ask siteops' operators for a larger limit",
			who, n, setting, limit, id)
		if !caller.Identified() {
			msg += unidentifiedHint
		}
		return nil, refused(nexusrpc.HandlerErrorTypeResourceExhausted, api.ErrTypeTooManyOnboardings, msg)
	case errors.Is(err, errNoSearchAttribute):
		// The limit cannot be kept, so nothing starts; the caller's
		// operation is retried until the operators register it.
		s.o.Logger.Error("nexus onboard cannot count running onboardings: register the search attribute", "search_attribute", SearchAttrCaller, "caller", caller, "error", err)
		msg := fmt.Sprintf("siteops cannot count running onboardings (%s): its namespace lacks the search attribute %s; siteops' operators register it with `temporal operator search-attribute create --name %s --type Keyword`",
			setting, SearchAttrCaller, SearchAttrCaller)
		return nil, &nexusrpc.HandlerError{Type: nexusrpc.HandlerErrorTypeUnavailable, Message: msg, Cause: errors.New(msg)}
	}
	return done, err
}

// onboard starts onboarding/<slug> as the starter does, with the caller's
// completion attached to it:
//
//   - an invalid input, or a hash that is not in the store, is refused
//     before anything starts (BAD_REQUEST, InvalidOnboardingSpec);
//   - a request that would start a run while its caller has as many
//     running as it may is refused before anything starts or is stored
//     (RESOURCE_EXHAUSTED, TooManyOnboardings; see admit);
//   - a new slug, or one whose last onboarding failed, starts a run whose
//     result completes the operation;
//   - the same spec while its onboarding runs joins it (the caller's
//     completion is attached to the running one);
//   - the same spec after its onboarding succeeded answers at once with
//     that onboarding's result;
//   - a different spec for the slug is refused (BAD_REQUEST,
//     OnboardingSpecConflict).
//
// A retried request (same Nexus request id) reaches the run it started.
func (s *Service) onboard(ctx context.Context, nc temporalnexus.NexusClient, in api.OnboardInput, o temporalnexus.StartTemporalOperationOptions) (temporalnexus.TemporalOperationResult[api.OnboardResult], error) {
	var none temporalnexus.TemporalOperationResult[api.OnboardResult]
	caller := callerOf(ctx, o.Header, o.Links, o.RequestID)
	p, err := s.prepare(ctx, in)
	if err != nil {
		return none, err
	}
	st := s.starter(ctx)
	id := workflows.OnboardingID(p.Input.Site.Slug)
	done, err := s.admit(ctx, st.Client(), caller, id)
	if err != nil {
		return none, handlerError(err)
	}
	started := ""
	defer func() { done(started) }()
	if err := s.storeTexts(ctx, caller, p.Texts); err != nil {
		return none, err
	}
	opts := st.StartOptions(workflows.OnboardingKind, id)
	// Partners share the task queue and the API's rate by who the server
	// says they are (their endpoint), not by onboarding: one partner's
	// hundred onboardings take turns with another's one.
	opts.Priority = workflows.OnboardingKind.Priority(caller.Key())
	// Who asked, as the request names it, beside the link to the caller's
	// workflow that Temporal records in the run's history.
	opts.Memo = map[string]any{"requested_by": "nexus", "caller_namespace": caller.AssertedNamespace, "caller_workflow_id": caller.AssertedWorkflowID}
	if caller.Endpoint != "" {
		opts.Memo["caller_endpoint"] = caller.Endpoint
	}
	if limit, _ := s.maxRunning(caller); limit > 0 {
		opts.TypedSearchAttributes = temporal.NewSearchAttributes(temporal.NewSearchAttributeKeyKeyword(SearchAttrCaller).ValueSet(caller.Key()))
	}
	for attempt := 0; attempt < 3; attempt++ {
		res, err := temporalnexus.StartUntypedWorkflow[api.OnboardResult](ctx, nc, opts, workflows.OnboardingWorkflowName, p.Input)
		var already *serviceerror.WorkflowExecutionAlreadyStarted
		if !errors.As(err, &already) {
			if err == nil && attempt == 0 {
				started = id // the first attempt never joins (its conflict policy fails): it started a run
			}
			return res, handlerError(err)
		}
		// The slug has a running or a successful onboarding: the starter
		// decides, as for every other caller, whether this is the same
		// spec.
		o, err := st.Onboard(ctx, starter.Prepared{Input: p.Input})
		if err != nil {
			return none, handlerError(err)
		}
		if o.Done != nil {
			var r api.OnboardResult
			if err := convert(*o.Done, &r); err != nil {
				return none, err
			}
			return temporalnexus.NewSyncResult(r), nil
		}
		// The same spec runs: attach to it. Should it succeed meanwhile,
		// the next round answers with its result.
		opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
	}
	msg := id + " changed while this request joined it; retry"
	return none, &nexusrpc.HandlerError{Type: nexusrpc.HandlerErrorTypeUnavailable, Message: msg, Cause: errors.New(msg)}
}

// prepare turns an onboard input into the workflow's: every inline text is
// replaced by its hash (and kept in Texts, for storeTexts), every hash is
// looked up in the store, characters are counted, and the whole input is
// validated, every problem at once. It stores nothing.
func (s *Service) prepare(ctx context.Context, in api.OnboardInput) (starter.Prepared, error) {
	var wf workflows.OnboardingInput
	if err := convert(in, &wf); err != nil {
		return starter.Prepared{}, badInput("%v", err)
	}
	inline := map[string]string{} // hash → text, stored once the request is admitted
	var problems []workflows.Problem
	add := func(field, format string, args ...any) {
		problems = append(problems, workflows.Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	for i := range wf.Knowledge {
		k := &wf.Knowledge[i]
		field := fmt.Sprintf("knowledge[%d]", i)
		text := k.Text
		switch {
		case k.Text != "" && k.TextHash != "":
			continue // Validate names it
		case k.Text != "":
			if !utf8.ValidString(text) {
				add(field+".text", "is not valid UTF-8")
				continue
			}
			k.TextHash, k.Text = store.KnowledgeHash(text), ""
			inline[k.TextHash] = text
		case k.TextHash != "":
			t, err := s.o.Texts.KnowledgeText(ctx, k.TextHash)
			if errors.Is(err, store.ErrNotFound) {
				add(field+".text_hash", "%s is not in siteops' store; store the text with the %s operation first", k.TextHash, api.StoreKnowledgeName)
				continue
			}
			if err != nil {
				return starter.Prepared{}, err
			}
			text = t
		default:
			continue // Validate names it
		}
		n := utf8.RuneCountInString(text)
		if k.Chars != 0 && k.Chars != n {
			add(field+".chars", "is %d but the text has %d characters; leave chars out and siteops counts them", k.Chars, n)
		}
		k.Chars = n
	}
	problems = append(problems, workflows.Validate(wf)...)
	if len(problems) > 0 {
		return starter.Prepared{}, handlerError(&starter.InvalidSpecError{Problems: problems})
	}
	return starter.Prepared{Input: wf, Texts: inline}, nil
}

// onboardingStatus reports an onboarding: its state, the step it is at,
// its result once it completed and its root cause when it did not succeed.
func (s *Service) onboardingStatus(ctx context.Context, in api.OnboardingStatusInput, _ nexusrpc.StartOperationOptions) (api.Onboarding, error) {
	if strings.TrimSpace(in.Slug) == "" {
		return api.Onboarding{}, badInput("slug: is required")
	}
	st := s.starter(ctx)
	id := workflows.OnboardingID(in.Slug)
	status, err := st.Describe(ctx, id)
	// A caller reads only the onboardings it started through the service,
	// as the server names it (its endpoint): another's, or one started
	// from the CLI, is not found, as if there were none, and its query is
	// never asked.
	if err == nil && !startedBy(status, callerOf(ctx, nexusrpc.Header{}, nil, "")) {
		err = starter.ErrNotFound
	}
	if err == nil {
		st.Detail(ctx, &status)
	}
	if errors.Is(err, starter.ErrNotFound) {
		return api.Onboarding{}, handlerError(fmt.Errorf("no onboarding of slug %q (%s) that this caller started: %w", in.Slug, id, starter.ErrNotFound))
	}
	if err != nil {
		return api.Onboarding{}, handlerError(err)
	}
	out := api.Onboarding{WorkflowID: status.WorkflowID, RunID: status.RunID, Status: status.Status, StartedAt: status.StartedAt, ClosedAt: status.ClosedAt}
	if status.Detail != nil {
		out.Progress = &api.OnboardingProgress{}
		if err := convert(status.Detail, out.Progress); err != nil {
			return api.Onboarding{}, err
		}
	}
	if status.Failure != nil {
		f := api.Failure(*status.Failure)
		out.Failure = &f
	}
	if status.Status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED.String() {
		var r api.OnboardResult
		if err := st.Client().GetWorkflow(ctx, id, status.RunID).Get(ctx, &r); err != nil {
			return api.Onboarding{}, handlerError(err)
		}
		out.Result = &r
	}
	return out, nil
}

// startedBy reports whether the run of status was started through the
// Nexus service by caller: its memo names the service and the same
// endpoint (none, for the callers without one, who share it).
func startedBy(status starter.Status, caller Caller) bool {
	return status.RequestedBy == "nexus" && status.CallerEndpoint == caller.Endpoint
}
