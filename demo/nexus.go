package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	nexuspb "go.temporal.io/api/nexus/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/workflows"
)

// The other system of the demo: it onboards customers from its own
// namespace through siteops' Nexus service.
const (
	nexusEndpoint   = "siteops"
	callerNamespace = "onboarding-partner"
	callerQueue     = "partner"
	callerWorkflow  = "PartnerOnboarding"
)

// partnerOnboarding is what the partner's workflow is given: a site to
// onboard and a knowledge text too long to pass inline to a workflow.
type partnerOnboarding struct {
	Catalogue string
	Spec      api.OnboardInput
}

// partnerWorkflow stores the long text through store-knowledge, then
// onboards the site through onboard, passing the text by its hash.
func partnerWorkflow(ctx workflow.Context, in partnerOnboarding) (api.OnboardResult, error) {
	c := workflow.NewNexusClient(nexusEndpoint, api.ServiceName)
	opts := workflow.NexusOperationOptions{ScheduleToCloseTimeout: 5 * time.Minute}
	var stored api.StoreKnowledgeOutput
	if err := c.ExecuteOperation(ctx, api.StoreKnowledge, api.StoreKnowledgeInput{Text: in.Catalogue}, opts).Get(ctx, &stored); err != nil {
		return api.OnboardResult{}, err
	}
	in.Spec.Knowledge = append(in.Spec.Knowledge, api.Knowledge{Name: "Catalogue", TextHash: stored.TextHash, Chars: stored.Chars})
	var res api.OnboardResult
	err := c.ExecuteOperation(ctx, api.Onboard, in.Spec, opts).Get(ctx, &res)
	return res, err
}

// onboardThroughNexus shows how other systems onboard: the partner's
// workflow, in a namespace of its own, reaches siteops through the Nexus
// endpoint (`temporal operator nexus endpoint create --name siteops
// --target-namespace default --target-task-queue siteops` does the same
// as ensureEndpoint) and onboards a third site.
func (d *run) onboardThroughNexus(ctx context.Context) error {
	d.stepf("a partner system onboards a third site from its own namespace through the Nexus endpoint %q", nexusEndpoint)
	c := d.starter.Client()
	if err := ensureNamespace(ctx, c, callerNamespace); err != nil {
		return err
	}
	var err error
	if d.endpointID, err = ensureEndpoint(ctx, c, nexusEndpoint, d.starter.Namespace(), taskQueue); err != nil {
		return err
	}
	// The partner holds no key of siteops': the service's answers cross
	// the boundary in plaintext (nexus.Plaintext), whatever
	// SITEOPS_PAYLOAD_KEY siteops encrypts its own histories with.
	partner, err := client.NewClientFromExisting(c, client.Options{Namespace: callerNamespace, Logger: tlog.NewStructuredLogger(d.log)})
	if err != nil {
		return err
	}
	defer partner.Close()
	w := sdkworker.New(partner, callerQueue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(partnerWorkflow, workflow.RegisterOptions{Name: callerWorkflow})
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()

	catalogue := bookCatalogue(20_000)
	start := time.Now()
	run, err := partner.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "partner/harbor-books", TaskQueue: callerQueue}, callerWorkflow,
		partnerOnboarding{Catalogue: catalogue, Spec: harborBooks()})
	if err != nil {
		return err
	}
	var res api.OnboardResult
	if err := run.Get(ctx, &res); err != nil {
		return fmt.Errorf("the partner's onboarding through Nexus: %w", err)
	}
	d.say("    %-26s site %s %s: %d knowledge sources (one of %d,%03d characters, stored through store-knowledge), %d FAQs  %s\n",
		workflows.OnboardingID("harbor-books"), res.SiteID, res.Status, len(res.KnowledgeIDs), len(catalogue)/1000, len(catalogue)%1000, len(res.FAQIDs),
		time.Since(start).Round(time.Millisecond))
	d.say("    started by the partner's workflow %s (namespace %s); only the text's hash entered siteops' history\n", run.GetID(), callerNamespace)
	d.facts = append(d.facts, fact{"onboarded through Nexus", fmt.Sprintf("%s %s, %d sources, by a workflow of namespace %s", res.SiteID, res.Status, len(res.KnowledgeIDs), callerNamespace)})
	return nil
}

// ensureNamespace registers the partner's namespace unless it exists.
func ensureNamespace(ctx context.Context, c client.Client, ns string) error {
	_, err := c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("registering namespace %s: %w", ns, err)
	}
	return nil
}

// ensureEndpoint creates the Nexus endpoint that routes to siteops' worker
// unless it exists, and returns its id: callers over HTTP address it by id.
func ensureEndpoint(ctx context.Context, c client.Client, name, ns, queue string) (string, error) {
	created, err := c.OperatorService().CreateNexusEndpoint(ctx, &operatorservice.CreateNexusEndpointRequest{Spec: &nexuspb.EndpointSpec{
		Name: name,
		Target: &nexuspb.EndpointTarget{Variant: &nexuspb.EndpointTarget_Worker_{
			Worker: &nexuspb.EndpointTarget_Worker{Namespace: ns, TaskQueue: queue},
		}},
	}})
	if err == nil {
		return created.GetEndpoint().GetId(), nil
	}
	var exists *serviceerror.AlreadyExists
	if !errors.As(err, &exists) {
		return "", fmt.Errorf("creating the Nexus endpoint %s: %w", name, err)
	}
	// A demo run again in the same --dir finds the endpoint of the last.
	list, err := c.OperatorService().ListNexusEndpoints(ctx, &operatorservice.ListNexusEndpointsRequest{Name: name})
	if err != nil {
		return "", fmt.Errorf("reading the Nexus endpoint %s: %w", name, err)
	}
	for _, ep := range list.GetEndpoints() {
		if ep.GetSpec().GetName() == name {
			return ep.GetId(), nil
		}
	}
	return "", fmt.Errorf("the Nexus endpoint %s exists but is not listed", name)
}

func harborBooks() api.OnboardInput {
	return api.OnboardInput{
		Site: api.Site{Title: "Harbor Books", Slug: "harbor-books", Type: "business", Template: "minimal",
			Content: api.SiteContent{Headline: "Books by the water", Subheadline: "Open every day",
				About: "An independent bookshop on the harbour front."},
			PersonaMode: "assistant", Languages: []string{"en"}},
		Agent: api.Agent{DisplayName: "Hal", Instructions: "Help visitors find books and order those not on the shelves.",
			EmbedEnabled: true, AllowedOrigins: []string{"https://harbor-books.example"}},
		Knowledge: []api.Knowledge{{Name: "Opening hours", Text: "Open 9 to 7 every day; 10 to 5 on public holidays."}},
		FAQs:      []api.FAQ{{Question: "Do you order books in?", Answer: "Yes; most arrive within three days.", Approved: true}},
	}
}

// bookCatalogue is a catalogue of n characters: more than a workflow
// input may carry inline.
func bookCatalogue(n int) string {
	var b strings.Builder
	for i := 1; b.Len() < n; i++ {
		fmt.Fprintf(&b, "Shelf %d: novels, travel and local history, new and second-hand, ordered by author. ", i)
	}
	return b.String()[:n]
}
