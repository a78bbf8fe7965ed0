package cluster_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/internal/cluster"
	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/store"
)

// start starts a cluster for t, stopped at cleanup. It skips t when
// PostgreSQL cannot be reached or the binaries are missing, except that
// missing binaries fail t when SITEOPS_REQUIRE_TEMPORAL is set, and an
// unreachable PostgreSQL when SITEOPS_REQUIRE_POSTGRES is.
func start(t *testing.T, opts cluster.Options) *cluster.Cluster {
	t.Helper()
	opts.Log = testWriter{t}
	begin := time.Now()
	c := cluster.StartFor(t, opts)
	t.Logf("cluster started in %s: frontend %s, HTTP %s", time.Since(begin).Round(time.Millisecond), c.Address, c.HTTPAddress)
	t.Cleanup(func() { // before StartFor's Stop: cleanups run last first
		if t.Failed() {
			for _, s := range cluster.Services {
				b, _ := os.ReadFile(c.LogFile(s))
				t.Logf("%s log (end):\n%s", s, tail(string(b), 3000))
			}
		}
	})
	return c
}

func TestCluster(t *testing.T) {
	c := start(t, cluster.Options{Namespaces: []string{"siteops"}})
	if c.Namespace != "siteops" || strings.Join(c.Namespaces, ",") != "default,siteops" {
		t.Errorf("Namespace %q, Namespaces %v; want siteops and [default siteops]", c.Namespace, c.Namespaces)
	}
	cl := dial(t, c, "")

	t.Run("workflow", func(t *testing.T) {
		runGreeting(t, cl, "siteops-cluster-test")
	})

	t.Run("search attributes", func(t *testing.T) {
		for _, ns := range c.Namespaces {
			resp, err := cl.OperatorService().ListSearchAttributes(t.Context(), &operatorservice.ListSearchAttributesRequest{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			for name, typ := range devserver.SearchAttributes {
				want, _ := enumspb.IndexedValueTypeFromString(typ)
				if got, ok := resp.GetCustomAttributes()[name]; !ok || got != want {
					t.Errorf("namespace %s: search attribute %s is %v (registered %t), want %v", ns, name, got, ok, want)
				}
			}
		}
		// A workflow carrying one is found by it (visibility on PostgreSQL).
		key := temporal.NewSearchAttributeKeyKeyword("SiteopsSiteID")
		run, err := cl.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{
			ID: "search-attribute-probe", TaskQueue: "nobody-polls",
			TypedSearchAttributes: temporal.NewSearchAttributes(key.ValueSet("site_42")),
		}, "Nothing")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cl.TerminateWorkflow(context.Background(), run.GetID(), "", "test over") }()
		siteopstest.EventuallyNil(t, 10*time.Second, "visibility to find the workflow by SiteopsSiteID", func() error {
			resp, err := cl.ListWorkflow(t.Context(), &workflowservice.ListWorkflowExecutionsRequest{Query: `SiteopsSiteID = "site_42"`})
			if err != nil {
				return err
			}
			if n := len(resp.GetExecutions()); n != 1 {
				return fmt.Errorf("query found %d workflows, want 1", n)
			}
			return nil
		})
	})

	t.Run("update", func(t *testing.T) {
		w := worker.New(cl, "updates", worker.Options{})
		w.RegisterWorkflow(counter)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		run, err := cl.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: "counter", TaskQueue: "updates"}, counter)
		if err != nil {
			t.Fatal(err)
		}
		update := func(n int) (int, error) {
			h, err := cl.UpdateWorkflow(t.Context(), client.UpdateWorkflowOptions{
				WorkflowID: run.GetID(), UpdateName: "add", Args: []any{n}, WaitForStage: client.WorkflowUpdateStageCompleted,
			})
			if err != nil {
				return 0, err
			}
			var total int
			err = h.Get(t.Context(), &total)
			return total, err
		}
		if got, err := update(2); err != nil || got != 2 {
			t.Fatalf("update add 2: got %d, %v; want 2", got, err)
		}
		if _, err := update(-1); err == nil || !strings.Contains(err.Error(), "must be positive") {
			t.Errorf("update add -1: %v; want the validator's rejection", err)
		}
		if err := cl.SignalWorkflow(t.Context(), run.GetID(), "", "done", nil); err != nil {
			t.Fatal(err)
		}
		var total int
		if err := run.Get(t.Context(), &total); err != nil || total != 2 {
			t.Errorf("counter result %d, %v; want 2", total, err)
		}
	})

	t.Run("HTTP API", func(t *testing.T) {
		resp, err := http.Get("http://" + c.HTTPAddress + "/api/v1/namespaces/siteops")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var body struct {
			NamespaceInfo struct{ Name string } `json:"namespaceInfo"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK || body.NamespaceInfo.Name != "siteops" {
			t.Errorf("GET /api/v1/namespaces/siteops: %s, name %q, %v", resp.Status, body.NamespaceInfo.Name, err)
		}
	})

	t.Run("setup script is idempotent", func(t *testing.T) {
		out, err := setupScript(t, c.Env(), "siteops", "default")
		if err != nil {
			t.Fatalf("re-running temporal-setup.sh: %v\n%s", err, out)
		}
		if !strings.Contains(out, "namespace siteops exists") {
			t.Errorf("temporal-setup.sh output does not say the namespace exists:\n%s", out)
		}
	})

	t.Run("siteops' own database", func(t *testing.T) {
		u, err := c.CreateSiteopsDatabase(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.CreateSiteopsDatabase(t.Context()) // make cluster when the cluster runs already
		if err != nil || again != u || !strings.Contains(u, "/"+c.SiteopsDatabase()+"?") {
			t.Fatalf("CreateSiteopsDatabase = %q, then %q, %v; want the same URL naming %s", u, again, err, c.SiteopsDatabase())
		}
		st, err := store.Open(t.Context(), u, store.Options{})
		if err != nil {
			t.Fatalf("siteops' store on %s: %v", u, err)
		}
		_ = st.Close()
	})

	t.Run("history restarts after SIGKILL", func(t *testing.T) {
		if err := c.KillService(cluster.History); err != nil {
			t.Fatal(err)
		}
		if got := c.Running(); len(got) != len(cluster.Services)-1 {
			t.Errorf("running after kill: %v", got)
		}
		begin := time.Now()
		if err := c.StartService(t.Context(), cluster.History); err != nil {
			t.Fatal(err)
		}
		t.Logf("history serving again after %s", time.Since(begin).Round(time.Millisecond))
		runGreeting(t, cl, "after-restart")
	})
}

// TestMutualTLS runs the frontend with mutual TLS: a client with a
// certificate from the client CA works, one without is refused.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t)
	caFile := writePEM(t, dir, "ca.pem", "CERTIFICATE", ca.der)
	// The server's certificate also serves the cluster's own clients.
	serverCert, serverKey := ca.issue(t, dir, "server", x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	clientCert, clientKey := ca.issue(t, dir, "client", x509.ExtKeyUsageClientAuth)

	c := start(t, cluster.Options{
		Namespaces: []string{"siteops"},
		TLS:        &cluster.TLS{CertFile: serverCert, KeyFile: serverKey, ClientCAFile: caFile},
	})
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	pair, err := tls.LoadX509KeyPair(clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("with a client certificate", func(t *testing.T) {
		cl, err := client.DialContext(t.Context(), client.Options{
			HostPort: c.Address, Namespace: "siteops", Logger: quietLogger(),
			ConnectionOptions: client.ConnectionOptions{TLS: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		runGreeting(t, cl, "over-mtls")
	})

	t.Run("without a client certificate", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		cl, err := client.DialContext(ctx, client.Options{
			HostPort: c.Address, Namespace: "siteops", Logger: quietLogger(),
			ConnectionOptions: client.ConnectionOptions{TLS: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}},
		})
		if err == nil {
			cl.Close()
			t.Fatal("dialled the mTLS frontend without a client certificate")
		}
		t.Logf("refused as expected: %v", err)
	})

	t.Run("without TLS", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		cl, err := client.DialContext(ctx, client.Options{HostPort: c.Address, Namespace: "siteops", Logger: quietLogger()})
		if err == nil {
			cl.Close()
			t.Fatal("dialled the TLS frontend in plaintext")
		}
	})

	t.Run("CLI and setup script with the TLS environment", func(t *testing.T) {
		env := strings.Join(c.Env(), "\n")
		for _, want := range []string{"TEMPORAL_TLS_CLIENT_CERT_PATH=", "TEMPORAL_TLS_SERVER_CA_CERT_PATH=" + caFile} {
			if !strings.Contains(env, want) {
				t.Errorf("Env() lacks %s:\n%s", want, env)
			}
		}
		if out, err := setupScript(t, c.Env()); err != nil {
			t.Fatalf("temporal-setup.sh over mTLS: %v\n%s", err, out)
		}
	})

	t.Run("internal clients present their certificate", func(t *testing.T) {
		// The frontend calls itself to add search attributes, and the worker
		// service runs system workflows through it: none may fail the
		// handshake (they verify the frontend's name, present a certificate).
		for _, s := range cluster.Services {
			b, _ := os.ReadFile(c.LogFile(s))
			if i := strings.Index(string(b), "handshake failed"); i >= 0 {
				t.Errorf("the %s service failed a TLS handshake: %s", s, tail(string(b[:min(len(b), i+300)]), 600))
			}
		}
	})
}

// runGreeting runs a workflow with an activity on an in-process worker.
func runGreeting(t *testing.T, cl client.Client, id string) {
	t.Helper()
	queue := "greetings-" + id
	w := worker.New(cl, queue, worker.Options{})
	w.RegisterWorkflow(greet)
	w.RegisterActivity(greeting)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	begin := time.Now()
	run, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, greet, "cluster")
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if got != "hello, cluster" {
		t.Errorf("greet returned %q", got)
	}
	t.Logf("workflow %s completed in %s", id, time.Since(begin).Round(time.Millisecond))
}

func greet(ctx workflow.Context, name string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var s string
	err := workflow.ExecuteActivity(ctx, greeting, name).Get(ctx, &s)
	return s, err
}

func greeting(ctx context.Context, name string) (string, error) {
	activity.GetLogger(ctx).Info("greeting", "name", name)
	return "hello, " + name, nil
}

// counter adds what "add" updates bring (positive numbers only) until the
// "done" signal, and returns the total.
func counter(ctx workflow.Context) (int, error) {
	total := 0
	err := workflow.SetUpdateHandlerWithOptions(ctx, "add",
		func(ctx workflow.Context, n int) (int, error) {
			total += n
			return total, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, n int) error {
			if n <= 0 {
				return errors.New("must be positive")
			}
			return nil
		}})
	if err != nil {
		return 0, err
	}
	workflow.GetSignalChannel(ctx, "done").Receive(ctx, nil)
	return total, nil
}

// setupScript runs deploy/temporal-setup.sh with the pinned CLI and env.
func setupScript(t *testing.T, env []string, namespaces ...string) (string, error) {
	t.Helper()
	cli, err := devserver.FindCLI()
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("../../deploy/temporal-setup.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "bash", append([]string{script}, namespaces...)...)
	cmd.Env = append(os.Environ(), append(env, "SITEOPS_TEMPORAL_CLI="+cli, "SITEOPS_SETUP_WAIT=20")...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func dial(t *testing.T, c *cluster.Cluster, namespace string) client.Client {
	t.Helper()
	opts, err := c.ClientOptions(namespace)
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger = quietLogger()
	cl, err := client.DialContext(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// ca is a test certificate authority.
type ca struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "siteops test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &ca{cert: cert, der: der, key: key}
}

// issue writes a certificate for 127.0.0.1 signed by the CA, and its key,
// to dir, returning their paths.
func (a *ca) issue(t *testing.T, dir, name string, usage ...x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "siteops test " + name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, dir, name+".pem", "CERTIFICATE", der), writePEM(t, dir, name+"-key.pem", "PRIVATE KEY", keyDER)
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// testWriter sends the cluster's progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func quietLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
