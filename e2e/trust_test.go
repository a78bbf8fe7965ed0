package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporalnexus"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// TestNexusRefusesThePlaybooks is the review's takeover, tried by every
// caller the Nexus service can have: a workflow in another namespace
// through an endpoint, plain HTTP through the endpoint's route, and plain
// HTTP through the route that addresses the task queue's service with no
// endpoint at all. Each playbook is refused, changes nothing at the
// service (no PATCH, no endpoint, no workflow) and is logged with the
// caller as the request asserts it, while a partner still onboards and
// reads its onboarding, and store-knowledge holds the callers to their
// quota: on this Temporal (1.29) the server names no endpoint, so every
// request counts against the one shared bucket, whichever namespace it
// names. The worker is `siteops worker`, with its quotas set as an
// operator sets them.
func TestNexusRefusesThePlaybooks(t *testing.T) {
	const ns = "siteops-trust"
	ds := startHTTPDevServer(t, ns)
	e := envOn(t, ds.address, ns)
	log := e.startWorkerProcess(t, "AGENTSITE_BASE_URL="+e.SimURL, "AGENTSITE_API_KEY="+apiKey, "SITEOPS_METRICS_ADDR=",
		"SITEOPS_WORKER_VERSIONING=false", "SITEOPS_NEXUS_TEXT_QUOTA=300", "SITEOPS_NEXUS_SHARED_TEXT_QUOTA=300")
	siteopstest.Eventually(t, 30*time.Second, "the worker to start", func() bool {
		return strings.Contains(log.String(), "worker started")
	})
	endpoint, endpointID := createEndpoint(t, ds.address, ns)
	c := newCaller(t, ds.address)
	site := e.site(t, "trusted")
	ins := map[string]any{
		api.EmbedOffName:     map[string]any{"site_id": site, "operator": "mallory", "reason": "takeover"},
		api.EmbedOnName:      map[string]any{"site_id": site, "operator": "mallory", "allowed_origins": []string{"https://phish.example"}},
		api.RotateSecretName: map[string]any{"old_endpoint_id": "we_1", "new_url": "https://outside.example/hook", "grace_period": "876000h", "decision_timeout": "8760h"},
	}
	for _, op := range api.NotServed {
		err := c.call(t, endpoint, op, ins[op], nil)
		if app := appError(err); app == nil || app.Type() != api.ErrTypeNotServed || !strings.Contains(app.Message(), "siteops ") {
			t.Errorf("%s from a workflow in namespace %s: %v; want %s naming the CLI command", op, callerNamespace, err, api.ErrTypeNotServed)
		}
		for _, url := range []string{
			ds.httpURL + "/nexus/endpoints/" + endpointID + "/services/siteops/" + op,
			ds.httpURL + "/namespaces/" + ns + "/task-queues/" + taskQueue + "/nexus-services/siteops/" + op,
		} {
			code, body := postJSON(t, url, ins[op])
			if code != http.StatusForbidden || !strings.Contains(body, "not served") {
				t.Errorf("plain HTTP %s answered %d %s; want 403 saying it is not served", url, code, body)
			}
		}
	}
	if n := len(patches(e)); n != 0 {
		t.Errorf("%d PATCHes reached the service; want none", n)
	}
	if eps := e.endpoints(t); len(eps) != 0 {
		t.Errorf("endpoints at the service: %+v; want none", eps)
	}
	for _, id := range []string{workflows.EmbedIncidentID(site), workflows.SecretRotationID("we_1")} {
		if _, err := e.Client.DescribeWorkflow(t.Context(), id, ""); err == nil {
			t.Errorf("%s was started", id)
		}
	}
	logged := log.String()
	for _, op := range api.NotServed {
		if n := strings.Count(logged, " operation="+op); n != 3 {
			t.Errorf("%d refusals of %s logged, want 3 (workflow, endpoint route, task-queue route):\n%s", n, op, logged)
		}
	}
	if !strings.Contains(logged, "caller.asserted_namespace="+callerNamespace) || !strings.Contains(logged, "caller.asserted_namespace=\"none given") {
		t.Errorf("the refusals do not name their callers as asserted (the workflow's namespace, and none for plain HTTP):\n%s", logged)
	}

	// A partner still onboards, and store-knowledge keeps it to its quota.
	var stored api.StoreKnowledgeOutput
	if err := c.call(t, endpoint, api.StoreKnowledgeName, api.StoreKnowledgeInput{Text: strings.Repeat("a", 200)}, &stored); err != nil {
		t.Fatalf("store-knowledge within the quota: %v", err)
	}
	err := c.call(t, endpoint, api.StoreKnowledgeName, api.StoreKnowledgeInput{Text: strings.Repeat("b", 200)}, nil)
	if app := appError(err); app == nil || app.Type() != api.ErrTypeQuotaExceeded {
		t.Errorf("store-knowledge past the caller's quota: %v; want %s", err, api.ErrTypeQuotaExceeded)
	}
	if !strings.Contains(log.String(), "knowledge text quota") {
		t.Errorf("the quota refusal is not logged:\n%s", log.String())
	}
	// A request that names a namespace of its own choosing gets no fresh
	// bucket: on this Temporal (1.29) no request carries an endpoint the
	// server names, so they all share one, whatever they assert.
	for _, url := range []string{
		ds.httpURL + "/nexus/endpoints/" + endpointID + "/services/siteops/" + api.StoreKnowledgeName,
		ds.httpURL + "/namespaces/" + ns + "/task-queues/" + taskQueue + "/nexus-services/siteops/" + api.StoreKnowledgeName,
	} {
		code, body := postWithLink(t, url, "invented-namespace", api.StoreKnowledgeInput{Text: strings.Repeat("c", 200)})
		if code != http.StatusTooManyRequests || !strings.Contains(body, "SITEOPS_NEXUS_SHARED_TEXT_QUOTA") {
			t.Errorf("store-knowledge naming a namespace of its own in Nexus-Link, to %s: %d %s; want 429 naming SITEOPS_NEXUS_SHARED_TEXT_QUOTA", url, code, body)
		}
	}
	if logged := log.String(); !strings.Contains(logged, "caller.key=nexus:unidentified caller.asserted_namespace=invented-namespace") {
		t.Errorf("the refusal does not log the asserted namespace beside the shared key:\n%s", logged)
	}
	spec := nexusSpec("trusted-partner")
	spec.Knowledge = append(spec.Knowledge, api.Knowledge{Name: "Stored", TextHash: stored.TextHash})
	var res api.OnboardResult
	if err := c.call(t, endpoint, api.OnboardName, spec, &res); err != nil || res.Status != "published" {
		t.Fatalf("a partner's onboard: %+v, %v", res, err)
	}
	var st api.Onboarding
	if err := c.call(t, endpoint, api.OnboardingStatusName, api.OnboardingStatusInput{Slug: "trusted-partner"}, &st); err != nil || st.Status != "Completed" {
		t.Errorf("onboarding-status: %+v, %v", st, err)
	}
}

// postWithLink posts v as JSON with a Nexus-Link header that names a
// workflow of namespace ns, as any HTTP caller may write one.
func postWithLink(t *testing.T, url, ns string, v any) (int, string) {
	t.Helper()
	link := temporalnexus.ConvertLinkWorkflowEventToNexusLink(&commonpb.Link_WorkflowEvent{
		Namespace: ns, WorkflowId: "any-workflow", RunId: "any-run",
		Reference: &commonpb.Link_WorkflowEvent_EventRef{EventRef: &commonpb.Link_WorkflowEvent_EventReference{EventId: 1, EventType: enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED}},
	})
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	// The Nexus routes wait for the worker's poll: under make test's load
	// (the race detector, six tests at once on two cores) one took over 30 s.
	ctx, cancel := context.WithTimeout(t.Context(), siteopstest.BoundRace(30*time.Second, 90*time.Second))
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Nexus-Link", fmt.Sprintf("<%s>; type=%q", link.URL.String(), link.Type))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(body)
}

// TestPoliciesHoldWhoeverStartsTheWorkflow starts the rotation and the
// registration the way any client of the namespace can, with an SDK and
// none of the CLI's checks: an endpoint outside the deployment and a
// century of grace are refused by the workflows themselves, and nothing
// changes at the service.
func TestPoliciesHoldWhoeverStartsTheWorkflow(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	in := e.startIngress(t)
	old := e.register(t, in, "/webhooks/v1", "lead.created")
	before := e.endpoints(t)

	start := func(kind workflows.Kind, id string, input any) error {
		run, err := e.Client.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, kind.Name, input)
		if err != nil {
			t.Fatal(err)
		}
		return run.Get(ctxWithin(t, time.Minute), nil)
	}
	for _, tc := range []struct {
		name  string
		kind  workflows.Kind
		id    string
		input any
		want  string
	}{
		{"a rotation onto a host outside the deployment", workflows.SecretRotationKind, workflows.SecretRotationID(old),
			workflows.SecretRotationInput{OldEndpointID: old, NewURL: "https://outside.example/webhooks/v2", Receiver: "v2"}, "is not under"},
		{"a rotation keeping the old secret for a century", workflows.SecretRotationKind, workflows.SecretRotationID(old) + "-century",
			workflows.SecretRotationInput{OldEndpointID: old, NewURL: in.url + "/webhooks/v2", Receiver: "v2", GracePeriod: workflows.Duration(876000 * time.Hour),
				VerifyTimeout: workflows.Duration(8760 * time.Hour)}, "grace_period is 876000h0m0s; the most it may be is 168h0m0s"},
		{"a registration outside the deployment", workflows.EndpointRegistrationKind, "webhook-endpoint/outside",
			workflows.EndpointRegistrationInput{URL: "https://outside.example/webhooks", Events: []string{"lead.created"}}, "is not under"},
	} {
		err := start(tc.kind, tc.id, tc.input)
		if app := appError(err); app == nil || app.Type() != activities.ErrTypePolicy || !strings.Contains(app.Message(), tc.want) {
			t.Errorf("%s: %v; want %s saying %q", tc.name, err, activities.ErrTypePolicy, tc.want)
		}
	}
	after := e.endpoints(t)
	if len(after) != len(before) || after[0].ID != old {
		t.Errorf("endpoints after the refused starts = %+v; want only %s as before", after, old)
	}
	d, err := e.Client.DescribeWorkflow(t.Context(), workflows.SecretRotationID(old), "")
	if err != nil {
		t.Fatalf("the refused rotation: %v; want Failed", err)
	}
	if st := d.RawResponse.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
		t.Errorf("the refused rotation: %v; want Failed", st)
	}
}

// postJSON posts v as JSON and returns the status and the body.
func postJSON(t *testing.T, url string, v any) (int, string) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	// The Nexus routes wait for the worker's poll: under make test's load
	// (the race detector, six tests at once on two cores) one took over 30 s.
	ctx, cancel := context.WithTimeout(t.Context(), siteopstest.BoundRace(30*time.Second, 90*time.Second))
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(body)
}

// TestCLIRecordsWhoRanIt runs a playbook from the CLI with an --operator
// that claims to be someone else: the incident records the claim, the
// decision lands in its memo, and Temporal records the CLI's own identity
// — the configured operator and the host — with the start and the update.
func TestCLIRecordsWhoRanIt(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	site := e.site(t, "identity")
	if out, err := e.siteopsWith(t, []string{"AGENTSITE_BASE_URL=" + e.SimURL}, "embed", "off", "--site", site, "--reason", "phishing copy", "--operator", "mallory"); err != nil {
		t.Fatalf("embed off: %v\n%s", err, out)
	}
	if out, err := e.siteops(t, "embed", "on", "--site", site, "--origin", "https://fixed.example", "--operator", "mallory"); err != nil {
		t.Fatalf("embed on: %v\n%s", err, out)
	}
	id := workflows.EmbedIncidentID(site)
	host, _ := os.Hostname()
	want := "siteops-cli oncall-e2e@" + host
	it := e.Client.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var identities []string
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			identities = append(identities, "start:"+a.GetIdentity())
		}
		if a := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil {
			identities = append(identities, "update:"+a.GetAcceptedRequest().GetMeta().GetIdentity())
		}
	}
	for _, kind := range []string{"start:", "update:"} {
		if !slices.Contains(identities, kind+want) {
			t.Errorf("identities recorded = %q; want %s%s (the configured operator, not --operator)", identities, kind, want)
		}
	}
	d, err := e.Client.DescribeWorkflow(t.Context(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	memo := map[string]string{}
	for k, p := range d.RawResponse.GetWorkflowExecutionInfo().GetMemo().GetFields() {
		var v any
		_ = json.Unmarshal(p.GetData(), &v)
		memo[k] = fmt.Sprint(v)
	}
	if memo["operator"] != "mallory" || memo["decided_by"] != "mallory" || memo["allowed_origins"] != "[https://fixed.example]" {
		t.Errorf("memo = %v; want the operator and the decision as claimed, with its origins", memo)
	}
}
