package bench

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

// BenchmarkOnboardingWorkflowInFlight is BenchmarkOnboardingInFlight
// without the onboarding's work: the onboarding workflow, started through
// starter.Onboard as there (validation, the texts stored, the start), on a
// worker whose activities answer at once (answeringActivities: the
// activities' names and types, no API call, no store), against the same
// no-op workflow. Its ratio is what the workflow itself costs against the
// no-op: its code, its larger payloads, its recorded validation; the
// difference from BenchmarkOnboardingInFlight's is what the API calls (to
// the simulator, in this process) and the store cost. Use -benchtime 1x.
func BenchmarkOnboardingWorkflowInFlight(b *testing.B) {
	scenario(b)
	n, rounds := inFlightSegments(b)
	if err := sameActivities(&answeringActivities{}, &activities.Activities{}); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		r := newOnboardingRig(b)
		queue := r.queue + "-answering"
		w := sdkworker.New(dialAsSiteops(b), queue, sdkworker.Options{})
		w.RegisterWorkflowWithOptions(workflows.Onboarding, workflow.RegisterOptions{Name: workflows.OnboardingWorkflowName})
		w.RegisterActivity(&answeringActivities{})
		if err := w.Start(); err != nil {
			b.Fatal(err)
		}
		s := starter.New(starter.Options{Client: r.c, Texts: r.texts, TaskQueue: queue})
		onboard := func(ctx context.Context, i int, round string) error {
			return onboardPublished(ctx, s, r.prepare(i, "wf-"+round), func() {})
		}
		for i := range len(r.specs) {
			if err := onboard(b.Context(), i, "warm"); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		pr := alternate(b, rounds, n, "onboarding workflows", onboard, func(ctx context.Context, i int, round string) error { return r.noop(ctx, i, round) })
		b.StopTimer()
		w.Stop()
		pr.report(b, n, "onboarding-workflows/s", "throughput-ratio")
	}
}

// answeringActivities stand for the onboarding's activities: the same
// names and types (sameActivities holds them to activities.Activities),
// answered at once.
type answeringActivities struct{}

func (answeringActivities) CreateSite(_ context.Context, in activities.CreateSiteInput) (activities.CreateSiteResult, error) {
	return activities.CreateSiteResult{SiteID: "site_" + in.Site.Slug, Status: "draft"}, nil
}

func (answeringActivities) UpdateAgent(context.Context, activities.UpdateAgentInput) error {
	return nil
}

func (answeringActivities) AddKnowledge(_ context.Context, in activities.AddKnowledgeInput) (activities.AddKnowledgeResult, error) {
	return activities.AddKnowledgeResult{KnowledgeID: "kn_" + in.IdempotencyKey[len(in.IdempotencyKey)-8:]}, nil
}

func (answeringActivities) AddFAQ(_ context.Context, in activities.AddFAQInput) (activities.AddFAQResult, error) {
	return activities.AddFAQResult{FAQID: "faq_" + in.IdempotencyKey[len(in.IdempotencyKey)-8:]}, nil
}

func (answeringActivities) Publish(context.Context, activities.PublishInput) (activities.PublishResult, error) {
	return activities.PublishResult{Status: "published"}, nil
}

// sameActivities says how stand's methods differ from real's of the same
// names, if they do: a stand-in that drifted from the activity it stands
// for would measure another workflow.
func sameActivities(stand, real any) error {
	st, rt := reflect.TypeOf(stand), reflect.TypeOf(real)
	for i := range st.NumMethod() {
		m := st.Method(i)
		rm, ok := rt.MethodByName(m.Name)
		if !ok {
			return fmt.Errorf("%s: %s has no such method", m.Name, rt)
		}
		if !sameSignature(m.Type, rm.Type) {
			return fmt.Errorf("%s is %s; %s's is %s", m.Name, m.Type, rt, rm.Type)
		}
	}
	return nil
}

// sameSignature says whether two methods' types, receivers first, take and
// return the same types after their receivers.
func sameSignature(a, b reflect.Type) bool {
	if a.NumIn() != b.NumIn() || a.NumOut() != b.NumOut() {
		return false
	}
	for i := 1; i < a.NumIn(); i++ {
		if a.In(i) != b.In(i) {
			return false
		}
	}
	for i := range a.NumOut() {
		if a.Out(i) != b.Out(i) {
			return false
		}
	}
	return true
}

type driftedActivities struct{}

func (driftedActivities) Publish(context.Context, activities.PublishInput) error { return nil }

func TestSameActivities(t *testing.T) {
	if err := sameActivities(&answeringActivities{}, &activities.Activities{}); err != nil {
		t.Errorf("answeringActivities: %v", err)
	}
	if err := sameActivities(&driftedActivities{}, &activities.Activities{}); err == nil {
		t.Error("a Publish that returns only an error was taken for the activity's")
	}
}
