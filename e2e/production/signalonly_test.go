package production

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/internal/cluster"
	"github.com/siteops/siteops/internal/ports"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/workflows"
)

// ingressName is the common name of the ingress's client certificate,
// which the cluster keeps to signals (cluster.Options.SignalOnly), as
// docs/kubernetes.md has a deployment do.
const ingressName = "siteops-ingress"

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
	o, err := temporal.ClientOptions(namespace)
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

// TestIngressIdentityMayOnlySignal checks the signal-only policy of
// siteops' server build on the cluster: the ingress's certificate may
// make the relay's calls (signal a workflow; start a lead sync with a
// signal, the one type the relay starts) and nothing else: not start an
// incident, nor start one with a signal, nor terminate, cancel, update or
// read a workflow, over gRPC or the HTTP API. The cluster's own
// certificate, which the worker and on-call hold, still may. Then a siteops ingress holding the ingress's
// certificate relays a delivery: its identity is enough for its work.
func TestIngressIdentityMayOnlySignal(t *testing.T) {
	world.Need(t)
	requirePolicy(t)
	if got, want := temporal.SignalOnly(), []string{ingressName}; !slices.Equal(got, want) {
		t.Fatalf("the cluster keeps %v to signals, want %v", got, want)
	}
	cert, key, err := certs.Client(t.TempDir(), ingressName)
	if err != nil {
		t.Fatal(err)
	}
	ingress := dialAs(t, cert, key)
	full, err := temporal.Dial(t.Context(), namespace)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	ctx := t.Context()
	queue := "signal-only" // no worker polls it: the workflows only wait
	site := fmt.Sprintf("site_signal_only_%d", time.Now().UnixNano())
	sync := workflows.LeadSyncKind.ID(site)
	leads := workflows.LeadsCreatedSignal{EventIDs: []string{"evt_signal_only_1"}}

	// The relay's calls.
	if _, err := ingress.SignalWithStartWorkflow(ctx, sync, workflows.SignalLeadsCreated, leads,
		client.StartWorkflowOptions{ID: sync, TaskQueue: queue}, workflows.LeadSyncKind.Name, workflows.LeadSyncInput{SiteID: site}); err != nil {
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
	if !strings.Contains(string(log), "Refused a call of a signal-only caller") || !strings.Contains(string(log), ingressName) {
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

// requirePolicy fails t when the cluster's server build has no
// signal-only policy: an upstream build would let the ingress's
// certificate do everything, and this test would say only that.
func requirePolicy(t *testing.T) {
	t.Helper()
	out, err := exec.Command(temporal.Server(), "--help").CombinedOutput() //nolint:gosec // the cluster's own server binary
	if err != nil || !strings.Contains(string(out), "SITEOPS_TEMPORAL_SIGNAL_ONLY") {
		t.Fatalf("%s is not siteops' server build (no signal-only policy in its --help; %v): make tools builds it from deploy/temporal-server", temporal.Server(), err)
	}
}
