package production

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/internal/cluster"
	"github.com/siteops/siteops/internal/ports"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/workflows"
)

// ingressName is the common name of the ingress's client certificate,
// whose role (ingress) keeps it to the relay's calls, as
// docs/kubernetes.md has a deployment do.
const ingressName = "siteops-ingress"

// policyQueue is the task queue the cluster's role policy names as
// siteops': the relay's and on-call's starts must run on it. No worker
// polls it here: the workflows started on it only wait.
const policyQueue = "siteops-policy"

// partners are the namespaces of the partners' certificates (the role
// partner, named by their common names).
var partners = []string{"acme", "globex"}

// roleCert makes a client certificate of the cluster's CA for cn with the
// role (its OU).
func roleCert(t *testing.T, cn, role string) (cert, key string) {
	t.Helper()
	cert, key, err := certs.ClientAs(t.TempDir(), cn, role)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// tlsAs is the cluster's client TLS configuration with the client
// certificate cert (key its key) instead of the cluster's own.
func tlsAs(t *testing.T, cert, key string) *tls.Config {
	t.Helper()
	o, err := temporal.ClientOptions(namespace)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	c := o.ConnectionOptions.TLS.Clone()
	c.Certificates = []tls.Certificate{pair}
	return c
}

// dialAs returns a client of the cluster's namespace that presents the
// client certificate cert (key its key) instead of the cluster's own.
func dialAs(t *testing.T, cert, key string) client.Client {
	t.Helper()
	return dialIn(t, namespace, cert, key)
}

// dialIn is dialAs in the namespace ns.
func dialIn(t *testing.T, ns, cert, key string) client.Client {
	t.Helper()
	o, err := temporal.ClientOptions(ns)
	if err != nil {
		t.Fatal(err)
	}
	o.ConnectionOptions.TLS = tlsAs(t, cert, key)
	c, err := client.DialContext(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// refused reports whether err is the frontend's refusal of a call it
// does not authorize.
func refused(err error) bool {
	var denied *serviceerror.PermissionDenied
	return errors.As(err, &denied)
}

// TestIngressIdentityMayOnlySignal checks the role policy of siteops'
// server build on the cluster for the ingress's certificate: it may make
// the relay's calls (signal a workflow; start a lead sync with a signal,
// in the relay's shape) and nothing else: not start an incident, nor
// start one with a signal, nor terminate, cancel, update or read a
// workflow, over gRPC or the HTTP API. The cluster's own certificate
// (admin) still may. Then a siteops ingress holding the ingress's
// certificate relays a delivery: its identity is enough for its work.
func TestIngressIdentityMayOnlySignal(t *testing.T) {
	world.Need(t)
	requirePolicy(t)
	cert, key := roleCert(t, ingressName, "ingress")
	ingress := dialAs(t, cert, key)
	full, err := temporal.Dial(t.Context(), namespace)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	ctx := t.Context()
	queue := policyQueue
	site := fmt.Sprintf("site_signal_only_%d", time.Now().UnixNano())
	sync := workflows.LeadSyncKind.ID(site)
	leads := workflows.LeadsCreatedSignal{EventIDs: []string{"evt_signal_only_1"}}

	// The relay's calls.
	if _, err := ingress.SignalWithStartWorkflow(ctx, sync, workflows.SignalLeadsCreated, leads,
		client.StartWorkflowOptions{ID: sync, TaskQueue: queue, WorkflowIDReusePolicy: workflows.LeadSyncKind.Policy.Reuse, Priority: workflows.LeadSyncKind.Priority(site)},
		workflows.LeadSyncKind.Name, workflows.LeadSyncInput{SiteID: site}); err != nil {
		t.Fatalf("the ingress's identity starting a lead sync with a signal, as the relay does: %v", err)
	}
	defer func() { _ = full.TerminateWorkflow(ctx, sync, "", "TestIngressIdentityMayOnlySignal is done") }()
	if err := ingress.SignalWorkflow(ctx, sync, "", workflows.SignalLeadsCreated, leads); err != nil {
		t.Errorf("the ingress's identity signalling a running lead sync: %v", err)
	}

	// On-call's powers, and reads the relay does not make.
	incident := workflows.EmbedIncidentKind.ID(site)
	incidentInput := workflows.EmbedIncidentInput{SiteID: site, Operator: "attacker", Reason: "code run in the ingress"}
	for _, tc := range []struct {
		what string
		call func() error
	}{
		{"start an incident", func() error {
			_, err := ingress.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: incident, TaskQueue: queue}, workflows.EmbedIncidentKind.Name, incidentInput)
			return err
		}},
		{"start an incident with a signal", func() error {
			_, err := ingress.SignalWithStartWorkflow(ctx, incident, workflows.SignalSync, nil,
				client.StartWorkflowOptions{ID: incident, TaskQueue: queue}, workflows.EmbedIncidentKind.Name, incidentInput)
			return err
		}},
		{"terminate a workflow", func() error { return ingress.TerminateWorkflow(ctx, sync, "", "code run in the ingress") }},
		{"cancel a workflow", func() error { return ingress.CancelWorkflow(ctx, sync, "") }},
		{"update a workflow", func() error {
			_, err := ingress.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: sync, UpdateName: "decide", WaitForStage: client.WorkflowUpdateStageAccepted})
			return err
		}},
		{"read a workflow", func() error { _, err := ingress.DescribeWorkflow(ctx, sync, ""); return err }},
	} {
		if err := tc.call(); !refused(err) {
			t.Errorf("the ingress's identity may %s: %v; want PermissionDenied", tc.what, err)
		}
	}
	if _, err := full.DescribeWorkflow(ctx, incident, ""); !errors.As(err, new(*serviceerror.NotFound)) {
		t.Errorf("the refused calls started %s: %v", incident, err)
	}
	// The cluster's own certificate keeps every power.
	if _, err := full.DescribeWorkflow(ctx, sync, ""); err != nil {
		t.Errorf("the cluster's certificate reading the lead sync: %v", err)
	}
	// The frontend's HTTP API is the same door, behind the same policy.
	web := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsAs(t, cert, key)}}
	httpAs := func(method, path, body string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, "https://"+temporal.HTTPAddress+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := web.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	base := "/api/v1/namespaces/" + namespace
	if code := httpAs(http.MethodGet, base, ""); code != http.StatusOK {
		t.Errorf("the ingress's identity reading its namespace over the HTTP API: %d, want 200", code)
	}
	// IDs without a slash, which the HTTP API's routes cannot carry.
	target := fmt.Sprintf("signal-only-target-%d", time.Now().UnixNano())
	if _, err := full.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: target, TaskQueue: queue}, workflows.LeadSyncKind.Name, workflows.LeadSyncInput{SiteID: site}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = full.TerminateWorkflow(ctx, target, "", "TestIngressIdentityMayOnlySignal is done") }()
	for _, call := range []struct{ what, path, body string }{
		{"start an incident", base + "/workflows/" + strings.ReplaceAll(incident, "/", "-"), `{"workflowType":{"name":"` + workflows.EmbedIncidentKind.Name + `"},"taskQueue":{"name":"` + queue + `"}}`},
		{"terminate a workflow", base + "/workflows/" + target + "/terminate", `{"reason":"code run in the ingress"}`},
	} {
		if code := httpAs(http.MethodPost, call.path, call.body); code != http.StatusForbidden {
			t.Errorf("the ingress's identity may %s over the HTTP API: %d, want 403", call.what, code)
		}
	}

	log, err := os.ReadFile(temporal.LogFile(cluster.Frontend))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "Refused a call by siteops' role policy") || !strings.Contains(string(log), ingressName) {
		t.Errorf("the frontend's log does not name the refused calls of %s", ingressName)
	}

	// A siteops ingress with that certificate: ready, and it relays.
	dbURL := storetest.PostgresSchemaURL(t)
	ps, err := ports.FreeN(2)
	if err != nil {
		t.Fatal(err)
	}
	env := append(clusterEnv(), "SITEOPS_DATABASE_URL="+dbURL, "SITEOPS_TASK_QUEUE="+queue,
		"SITEOPS_WEBHOOK_SECRETS="+generatorSecret, "AGENTSITE_BASE_URL=http://127.0.0.1:1", "AGENTSITE_API_KEY="+apiKey,
		fmt.Sprintf("SITEOPS_INGRESS_ADDR=127.0.0.1:%d", ps[0]), fmt.Sprintf("SITEOPS_INGRESS_ADMIN_ADDR=127.0.0.1:%d", ps[1]),
		"TEMPORAL_TLS_CLIENT_CERT_PATH="+cert, "TEMPORAL_TLS_CLIENT_KEY_PATH="+key)
	in := startProc(t, "ingress", env, "ingress")
	ingressURL := fmt.Sprintf("http://127.0.0.1:%d", ps[0])
	ready(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", ps[1]))
	relayed := fmt.Sprintf("site_relayed_%d", time.Now().UnixNano())
	if code := deliver(t, ingressURL, "evt_signal_only_relayed", relayed, "lead_1"); code != 200 && code != 204 {
		t.Fatalf("the delivery was answered %d\ningress log:\n%s", code, in.log.String())
	}
	st, err := store.Open(ctx, dbURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	siteopstest.Eventually(t, 30*time.Second, "the relay signalled the lead sync", func() bool {
		ev, err := st.Event(ctx, "evt_signal_only_relayed")
		return err == nil && ev.Outcome == store.OutcomeSignalled
	})
	started := workflows.LeadSyncKind.ID(relayed)
	if _, err := full.DescribeWorkflow(ctx, started, ""); err != nil {
		t.Errorf("the relayed delivery's lead sync %s: %v\ningress log:\n%s", started, err, in.log.String())
	}
	_ = full.TerminateWorkflow(ctx, started, "", "TestIngressIdentityMayOnlySignal is done")
	if strings.Contains(in.log.String(), "PermissionDenied") || strings.Contains(in.log.String(), "unauthorized") {
		t.Errorf("the ingress was refused a call it makes:\n%s", in.log.String())
	}
}

// adminClient needs the cluster and its role policy, and returns a client
// of its namespace with the cluster's own certificate (the admin role),
// closed when t ends.
func adminClient(t *testing.T) client.Client {
	t.Helper()
	world.Need(t)
	requirePolicy(t)
	c, err := temporal.Dial(t.Context(), namespace)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// requirePolicy fails t when the cluster's server build has no role
// policy: an upstream build would let every certificate do everything,
// and these tests would say only that.
func requirePolicy(t *testing.T) {
	t.Helper()
	out, err := exec.Command(temporal.Server(), "--help").CombinedOutput() //nolint:gosec // the cluster's own server binary
	if err != nil || !strings.Contains(string(out), "SITEOPS_TEMPORAL_NAMESPACE") {
		t.Fatalf("%s is not siteops' server build (no role policy in its --help; %v): make tools builds it from deploy/temporal-server", temporal.Server(), err)
	}
}

// TestIngressCannotReachAnIncident tries, with the ingress's certificate,
// each way a SignalWithStart could reach beyond the relay's: one field of
// the relay's own call changed at a time, against a running incident's ID
// where the field allows. Each is refused, and after each the incident
// is still the same running run.
func TestIngressCannotReachAnIncident(t *testing.T) {
	full := adminClient(t)
	ctx := t.Context()
	site := fmt.Sprintf("site_incident_%d", time.Now().UnixNano())
	incident := workflows.EmbedIncidentKind.ID(site)
	oncallCert, oncallKey := roleCert(t, "alice", "oncall")
	oncall := dialAs(t, oncallCert, oncallKey)
	run, err := oncall.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: incident, TaskQueue: policyQueue, Priority: workflows.EmbedIncidentKind.Priority(site)},
		workflows.EmbedIncidentKind.Name, workflows.EmbedIncidentInput{SiteID: site, Operator: "alice", Reason: "TestIngressCannotReachAnIncident"})
	if err != nil {
		t.Fatalf("on-call starting an incident: %v", err)
	}
	defer func() { _ = full.TerminateWorkflow(ctx, incident, "", "TestIngressCannotReachAnIncident is done") }()

	cert, key := roleCert(t, ingressName, "ingress")
	ingress := dialAs(t, cert, key)
	other := dialIn(t, partners[0], cert, key)
	leads := workflows.LeadsCreatedSignal{EventIDs: []string{"evt_incident_1"}}
	// relay is the relay's own call for the lead sync of key, which each
	// case changes.
	relay := func(key string) (string, client.StartWorkflowOptions) {
		id := workflows.LeadSyncKind.ID(key)
		return id, client.StartWorkflowOptions{ID: id, TaskQueue: policyQueue, WorkflowIDReusePolicy: workflows.LeadSyncKind.Policy.Reuse,
			Priority: workflows.LeadSyncKind.Priority(key)}
	}
	for _, tc := range []struct {
		field string
		c     client.Client
		typ   string
		opts  func(o *client.StartWorkflowOptions)
	}{
		{"the incident's ID, conflict policy TerminateExisting", ingress, workflows.LeadSyncKind.Name, func(o *client.StartWorkflowOptions) {
			o.ID, o.WorkflowIDConflictPolicy = incident, enumspb.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING
		}},
		{"the incident's ID, reuse policy TerminateIfRunning", ingress, workflows.LeadSyncKind.Name, func(o *client.StartWorkflowOptions) {
			//lint:ignore SA1019 an attacker may still send it, and the server still honours it
			o.ID, o.WorkflowIDReusePolicy = incident, enumspb.WORKFLOW_ID_REUSE_POLICY_TERMINATE_IF_RUNNING //nolint:staticcheck // deprecated, still honoured: refused here
		}},
		{"the incident's ID", ingress, workflows.LeadSyncKind.Name, func(o *client.StartWorkflowOptions) { o.ID = incident }},
		{"the incident's type", ingress, workflows.EmbedIncidentKind.Name, func(o *client.StartWorkflowOptions) {}},
		{"conflict policy TerminateExisting", ingress, workflows.LeadSyncKind.Name, func(o *client.StartWorkflowOptions) {
			o.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING
		}},
		{"reuse policy TerminateIfRunning", ingress, workflows.LeadSyncKind.Name, func(o *client.StartWorkflowOptions) {
			//lint:ignore SA1019 an attacker may still send it, and the server still honours it
			o.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_TERMINATE_IF_RUNNING //nolint:staticcheck // deprecated, still honoured: refused here
		}},
		{"a cron schedule", ingress, workflows.LeadSyncKind.Name, func(o *client.StartWorkflowOptions) { o.CronSchedule = "* * * * *" }},
		{"a start delay", ingress, workflows.LeadSyncKind.Name, func(o *client.StartWorkflowOptions) { o.StartDelay = time.Hour }},
		{"an execution timeout", ingress, workflows.LeadSyncKind.Name, func(o *client.StartWorkflowOptions) { o.WorkflowExecutionTimeout = time.Second }},
		{"the playbook's priority", ingress, workflows.LeadSyncKind.Name, func(o *client.StartWorkflowOptions) { o.Priority.PriorityKey = 1 }},
		{"another fairness key", ingress, workflows.LeadSyncKind.Name, func(o *client.StartWorkflowOptions) { o.Priority.FairnessKey = "invented" }},
		{"another task queue", ingress, workflows.LeadSyncKind.Name, func(o *client.StartWorkflowOptions) { o.TaskQueue = "elsewhere" }},
		{"another namespace", other, workflows.LeadSyncKind.Name, func(o *client.StartWorkflowOptions) {}},
	} {
		key := fmt.Sprintf("%s_%d", site, time.Now().UnixNano())
		id, o := relay(key)
		tc.opts(&o)
		if o.ID != id {
			id = o.ID
		}
		_, err := tc.c.SignalWithStartWorkflow(ctx, id, workflows.SignalLeadsCreated, leads, o, tc.typ, workflows.LeadSyncInput{SiteID: key})
		if !refused(err) {
			t.Errorf("the ingress's SignalWithStart with %s: %v; want PermissionDenied", tc.field, err)
			_ = full.TerminateWorkflow(ctx, id, "", "TestIngressCannotReachAnIncident: allowed by mistake")
		}
		d, err := full.DescribeWorkflow(ctx, incident, "")
		if err != nil {
			t.Fatalf("after the SignalWithStart with %s, reading the incident: %v", tc.field, err)
		}
		if info := d.RawResponse.GetWorkflowExecutionInfo(); info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || info.GetExecution().GetRunId() != run.GetRunID() {
			t.Fatalf("after the SignalWithStart with %s, the incident is %v (run %s, want %s running)", tc.field,
				info.GetStatus(), info.GetExecution().GetRunId(), run.GetRunID())
		}
	}
}

// TestRolesOnTheCluster checks each role's door on the cluster: on-call
// reads and starts its playbooks but ends nothing; a partner runs its own
// namespace and reads nothing of siteops'; a certificate of the cluster's
// CA without a role is refused its first call, and the frontend's log
// names it.
func TestRolesOnTheCluster(t *testing.T) {
	full := adminClient(t)
	ctx := t.Context()
	site := fmt.Sprintf("site_roles_%d", time.Now().UnixNano())

	cert, key := roleCert(t, "bob", "oncall")
	oncall := dialAs(t, cert, key)
	incident := workflows.EmbedIncidentKind.ID(site)
	if _, err := oncall.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: incident, TaskQueue: policyQueue, Priority: workflows.EmbedIncidentKind.Priority(site)},
		workflows.EmbedIncidentKind.Name, workflows.EmbedIncidentInput{SiteID: site, Operator: "bob", Reason: "TestRolesOnTheCluster"}); err != nil {
		t.Fatalf("on-call starting an incident: %v", err)
	}
	defer func() { _ = full.TerminateWorkflow(ctx, incident, "", "TestRolesOnTheCluster is done") }()
	if _, err := oncall.DescribeWorkflow(ctx, incident, ""); err != nil {
		t.Errorf("on-call reading its incident: %v", err)
	}
	if err := oncall.TerminateWorkflow(ctx, incident, "", "on-call may not"); !refused(err) {
		t.Errorf("on-call terminating an incident: %v; want PermissionDenied", err)
	}
	if _, err := oncall.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "lead-events/0", TaskQueue: policyQueue, Priority: workflows.LeadEventsKind.Priority("0")},
		workflows.LeadEventsKind.Name, nil); !refused(err) {
		t.Errorf("on-call starting a lead shard: %v; want PermissionDenied", err)
	}

	pcert, pkey := roleCert(t, partners[0], "partner")
	own := dialIn(t, partners[0], pcert, pkey)
	if _, err := own.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: partners[0]}); err != nil {
		t.Errorf("partner %s listing its own namespace: %v", partners[0], err)
	}
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"reading siteops' incident", func() error {
			_, err := dialAs(t, pcert, pkey).DescribeWorkflow(ctx, incident, "")
			return err
		}()},
		{"listing another partner's namespace", func() error {
			_, err := dialIn(t, partners[1], pcert, pkey).ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: partners[1]})
			return err
		}()},
	} {
		if !refused(tc.err) {
			t.Errorf("partner %s %s: %v; want PermissionDenied", partners[0], tc.what, tc.err)
		}
	}

	ncert, nkey, err := certs.Client(t.TempDir(), "stray-service")
	if err != nil {
		t.Fatal(err)
	}
	o, err := temporal.ClientOptions(namespace)
	if err != nil {
		t.Fatal(err)
	}
	o.ConnectionOptions.TLS = tlsAs(t, ncert, nkey)
	if c, err := client.DialContext(ctx, o); err == nil {
		_, err = c.DescribeWorkflow(ctx, incident, "")
		c.Close()
		if !refused(err) {
			t.Errorf("a certificate without a role reading an incident: %v; want PermissionDenied", err)
		}
	} else if !refused(err) {
		t.Errorf("a certificate without a role dialling: %v; want PermissionDenied", err)
	}
	siteopstest.Eventually(t, 10*time.Second, "the frontend's log names the certificate without a role", func() bool {
		log, err := os.ReadFile(temporal.LogFile(cluster.Frontend))
		return err == nil && strings.Contains(string(log), "stray-service") && strings.Contains(string(log), "names no role")
	})
}
