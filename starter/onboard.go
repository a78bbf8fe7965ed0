package starter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/workflows"
)

// InvalidSpecError is an onboarding input that breaks the contract; nothing
// was started.
type InvalidSpecError struct {
	Problems []workflows.Problem
}

func (e *InvalidSpecError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return fmt.Sprintf("the onboarding breaks %d rule(s): %s", len(e.Problems), strings.Join(lines, "; "))
}

// SpecConflictError is returned when the slug was onboarded, or is being
// onboarded, from a different spec; nothing was started.
type SpecConflictError struct {
	WorkflowID string
	// Differences name the fields that differ, e.g. site.title.
	Differences []string
}

func (e *SpecConflictError) Error() string {
	return fmt.Sprintf("%s was started with a different spec (%s differ); a slug is onboarded once — use a new slug, or see `siteops status %s`",
		e.WorkflowID, strings.Join(e.Differences, ", "), e.WorkflowID)
}

// Onboarding says what Onboard did.
type Onboarding struct {
	WorkflowID string
	Run        client.WorkflowRun
	// Started is true when this call started the onboarding. It is false
	// when an onboarding of the same spec was running (Run joins it) or had
	// succeeded (Done holds its result).
	Started bool
	Done    *workflows.OnboardingResult
}

// Onboarded is an onboarding's result as `siteops onboard` gives it: the
// result, the workflow, and whether this run made it.
type Onboarded struct {
	workflows.OnboardingResult
	WorkflowID string `json:"workflow_id"`
	// Outcome is OutcomeOnboarded, or OutcomeAlreadyOnboarded when the
	// same spec had been onboarded before.
	Outcome string `json:"outcome"`
}

// The outcomes of an onboarding, as Onboarded.Outcome says them.
const (
	OutcomeOnboarded        = "onboarded"
	OutcomeAlreadyOnboarded = "already_onboarded"
)

// OnboardingSummary says in words what an onboarding made: the site, its
// status, its knowledge sources and FAQs.
func OnboardingSummary(res workflows.OnboardingResult) string {
	orNone := func(ids []string) string {
		if s := strings.Join(ids, ", "); s != "" {
			return s
		}
		return "none"
	}
	return fmt.Sprintf("site %s is %s (knowledge %s; FAQs %s)", res.SiteID, res.Status, orNone(res.KnowledgeIDs), orNone(res.FAQIDs))
}

// Onboard validates the input, stores the texts, and starts
// onboarding/<slug>. Onboarding the same spec again is not an error: it
// joins the running onboarding or reports the result of the one that
// succeeded. A different spec for the same slug is a *SpecConflictError;
// an invalid one an *InvalidSpecError.
func (s *Starter) Onboard(ctx context.Context, p Prepared) (Onboarding, error) {
	if problems := workflows.Validate(p.Input); len(problems) > 0 {
		return Onboarding{}, &InvalidSpecError{Problems: problems}
	}
	if s.o.Texts == nil && len(p.Texts) > 0 {
		return Onboarding{}, errors.New("starter: onboarding with knowledge texts needs the store (SITEOPS_DATABASE_URL)")
	}
	if err := s.storeTexts(ctx, p.Texts); err != nil {
		return Onboarding{}, err
	}
	id := workflows.OnboardingID(p.Input.Site.Slug)
	var o Onboarding
	// A start whose answer was lost is not repeated: the next try finds
	// the run it started and joins it.
	err := s.Patiently(ctx, "starting "+id, func() error {
		var err error
		o, err = s.startOnboarding(ctx, id, p.Input)
		return err
	})
	return o, err
}

// storeTexts stores the texts of an onboarding, keyed by their hashes, in
// one call to the store.
func (s *Starter) storeTexts(ctx context.Context, texts map[string]string) error {
	if len(texts) == 0 {
		return nil
	}
	want := slices.Sorted(maps.Keys(texts))
	all := make([]string, len(want))
	for i, hash := range want {
		all[i] = texts[hash]
	}
	got, err := s.o.Texts.PutKnowledgeTexts(ctx, all)
	if err != nil {
		return err
	}
	if len(got) != len(want) {
		return fmt.Errorf("starter: the store returned %d hashes for %d texts", len(got), len(want))
	}
	for i, hash := range want {
		if got[i] != hash {
			return fmt.Errorf("starter: stored text hash %s differs from %s", got[i], hash)
		}
	}
	return nil
}

// startOnboarding starts id, or compares the input of the run that holds
// the ID with in.
func (s *Starter) startOnboarding(ctx context.Context, id string, in workflows.OnboardingInput) (Onboarding, error) {
	opts := s.options(workflows.OnboardingKind, id)
	opts.WorkflowExecutionErrorWhenAlreadyStarted = true
	run, err := s.o.Client.ExecuteWorkflow(ctx, opts, workflows.OnboardingWorkflowName, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if !errors.As(err, &started) {
		return Onboarding{WorkflowID: id, Run: run, Started: err == nil}, err
	}
	return s.existingOnboarding(ctx, id, in)
}

// existingOnboarding compares the input of the slug's current run with in.
func (s *Starter) existingOnboarding(ctx context.Context, id string, in workflows.OnboardingInput) (Onboarding, error) {
	d, err := s.o.Client.DescribeWorkflow(ctx, id, "")
	if err != nil {
		return Onboarding{}, err
	}
	info := d.RawResponse.GetWorkflowExecutionInfo()
	runID := info.GetExecution().GetRunId()
	var prev workflows.OnboardingInput
	if err := s.input(ctx, id, runID, &prev); err != nil {
		return Onboarding{}, err
	}
	if diffs := Differences(prev, in); len(diffs) > 0 {
		return Onboarding{}, &SpecConflictError{WorkflowID: id, Differences: diffs}
	}
	o := Onboarding{WorkflowID: id, Run: s.o.Client.GetWorkflow(ctx, id, runID)}
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		var res workflows.OnboardingResult
		if err := o.Run.Get(ctx, &res); err != nil {
			return Onboarding{}, err
		}
		o.Done = &res
	}
	return o, nil
}

// input reads the input a run was started with from its first history
// event.
func (s *Starter) input(ctx context.Context, id, runID string, valuePtr any) error {
	it := s.o.Client.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return fmt.Errorf("%s has no history", id)
	}
	ev, err := it.Next()
	if err != nil {
		return err
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return fmt.Errorf("%s: the first history event is not the start", id)
	}
	return s.converter().FromPayloads(attrs.GetInput(), valuePtr)
}

// Differences lists the JSON paths at which a and b differ, e.g.
// site.title or knowledge[2]; empty when they are the same.
func Differences(a, b any) []string {
	var av, bv any
	if err := roundTrip(a, &av); err != nil {
		return []string{"(unreadable: " + err.Error() + ")"}
	}
	if err := roundTrip(b, &bv); err != nil {
		return []string{"(unreadable: " + err.Error() + ")"}
	}
	var out []string
	diff("", av, bv, &out)
	return out
}

func roundTrip(v any, out *any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func diff(path string, a, b any, out *[]string) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			*out = append(*out, orRoot(path))
			return
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		slices.Sort(sorted)
		for _, k := range sorted {
			p := k
			if path != "" {
				p = path + "." + k
			}
			diff(p, av[k], bv[k], out)
		}
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			*out = append(*out, fmt.Sprintf("%s (%d entries, now %d)", orRoot(path), len(av), length(b)))
			return
		}
		for i := range av {
			diff(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i], out)
		}
	default:
		if !reflect.DeepEqual(a, b) {
			*out = append(*out, orRoot(path))
		}
	}
}

func length(v any) int {
	if l, ok := v.([]any); ok {
		return len(l)
	}
	return 0
}

func orRoot(path string) string {
	if path == "" {
		return "(the whole input)"
	}
	return path
}
