package deploy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/siteops/siteops/internal/cluster"
)

const (
	tlsCertsScript = "tls-certs.sh"
	frontendName   = "temporal-frontend.temporal.svc.cluster.local"
)

// TestTLSCertsScript runs the runbook's certificate step: tls-certs.sh makes
// a CA, the frontend's certificate (the Service's name and the names given,
// server and client usages), siteops' client certificate and the
// ingress's, each with its role (OU), keys 0600; it refuses a directory
// that holds them, writing nothing; it issues an on-call certificate from
// the same CA; and a real Temporal cluster serving mutual TLS with those
// files and the role policy of temporal/configmap.yaml takes the worker's
// certificate, verified under the frontend Service's name, for its calls,
// the ingress's for its checks but not to start a workflow, on-call's to
// start an incident but not to terminate it, refuses a certificate of
// the same CA without a role, and a client without one.
func TestTLSCertsScript(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skipf("SKIP: openssl is not installed (Debian: openssl): %v", err)
	}
	dir := filepath.Join(t.TempDir(), "pki")
	out, code := runBash(t, "./"+tlsCertsScript+" "+dir+" localhost 127.0.0.1")
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s", tlsCertsScript, code, out)
	}
	for _, want := range []string{"kubectl -n temporal create secret generic temporal-tls", "kubectl -n siteops create secret generic siteops-temporal-tls",
		"kubectl -n siteops create secret generic siteops-ingress-temporal-tls", "IP:127.0.0.1"} {
		if !strings.Contains(out, want) {
			t.Errorf("the script's output does not say %q:\n%s", want, out)
		}
	}
	for _, f := range []string{"ca-key.pem", "frontend-key.pem", "client-key.pem", "ingress-key.pem"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, fi.Mode().Perm())
		}
	}
	roots := x509.NewCertPool()
	roots.AddCert(readCert(t, filepath.Join(dir, "ca.pem")))
	frontend, clientCert := readCert(t, filepath.Join(dir, "frontend.pem")), readCert(t, filepath.Join(dir, "client.pem"))
	for _, name := range []string{frontendName, "localhost", "127.0.0.1"} {
		if _, err := frontend.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("the frontend's certificate for %s: %v", name, err)
		}
	}
	if _, err := frontend.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the frontend's certificate for the services' own clients: %v", err)
	}
	if _, err := clientCert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil || clientCert.Subject.CommonName != "siteops" {
		t.Errorf("siteops' client certificate (CN %q): %v", clientCert.Subject.CommonName, err)
	}
	if _, err := clientCert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("siteops' client certificate may serve as a server's")
	}
	policy := configMapData(manifests(t, temporalDir))["temporal-server"]
	for file, role := range map[string]string{"frontend.pem": "admin", "client.pem": "worker", "ingress.pem": "ingress"} {
		c := readCert(t, filepath.Join(dir, file))
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil || !slices.Equal(c.Subject.OrganizationalUnit, []string{role}) {
			t.Errorf("%s (OU %q): %v; want the role %s", file, c.Subject.OrganizationalUnit, err, role)
		}
	}
	if out, code := runBash(t, "./"+tlsCertsScript+" --role oncall --name alice "+dir); code != 0 {
		t.Fatalf("issuing on-call's certificate: exit %d\n%s", code, out)
	}
	if c := readCert(t, filepath.Join(dir, "alice-oncall.pem")); c.Subject.CommonName != "alice" || !slices.Equal(c.Subject.OrganizationalUnit, []string{"oncall"}) {
		t.Errorf("on-call's certificate: %v", c.Subject)
	}
	if out, code := runBash(t, "./"+tlsCertsScript+" --role oncall --name alice "+dir); code != 1 || !strings.Contains(out, "refusing") {
		t.Errorf("issuing on-call's certificate again: exit %d\n%s; want 1, refusing", code, out)
	}
	if out, code := runBash(t, "./"+tlsCertsScript+" --role root --name alice "+dir); code != 2 || !strings.Contains(out, "want one of") {
		t.Errorf("an unknown role: exit %d\n%s; want 2", code, out)
	}

	// Made again into the same directory: refused, nothing written.
	before, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if out, code := runBash(t, "./"+tlsCertsScript+" "+dir); code != 1 || !strings.Contains(out, "refusing") {
		t.Errorf("made again into %s: exit %d\n%s; want 1, refusing", dir, code, out)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "ca.pem")); !bytes.Equal(before, after) {
		t.Error("a refused run changed ca.pem")
	}
	if out, code := runBash(t, "./"+tlsCertsScript); code != 2 || !strings.Contains(out, "usage") {
		t.Errorf("without DIR: exit %d\n%s; want 2 and the usage", code, out)
	}

	// A certificate of the same CA without a role, as the script made
	// them before roles.
	norole := filepath.Join(dir, "norole")
	if out, code := runBash(t, "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "+norole+"-key.pem && "+
		"openssl req -new -key "+norole+"-key.pem -subj /CN=siteops -out "+norole+".csr && "+
		"printf 'extendedKeyUsage=clientAuth\\n' > "+norole+".ext && "+
		"openssl x509 -req -in "+norole+".csr -CA "+dir+"/ca.pem -CAkey "+dir+"/ca-key.pem -CAcreateserial -days 1 -extfile "+norole+".ext -out "+norole+".pem"); code != 0 {
		t.Fatalf("making a certificate without a role: exit %d\n%s", code, out)
	}

	// The files serve a real cluster's frontend under mutual TLS, with
	// the role policy as temporal/configmap.yaml sets it.
	rolePolicy := map[string]string{}
	for k, v := range policy {
		if strings.HasPrefix(k, "SITEOPS_TEMPORAL_") {
			rolePolicy[k] = v
		}
	}
	c := cluster.StartFor(t, cluster.Options{
		Namespaces: []string{"siteops"},
		TLS:        &cluster.TLS{CertFile: filepath.Join(dir, "frontend.pem"), KeyFile: filepath.Join(dir, "frontend-key.pem"), ClientCAFile: filepath.Join(dir, "ca.pem"), ServerName: frontendName},
		Policy:     rolePolicy,
	})
	pair := func(name string) []tls.Certificate {
		p, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{p}
	}
	// dial describes the namespace, then starts an incident on siteops'
	// task queue as on-call's CLI would (no worker runs it; it is
	// terminated at once by the worker's certificate) when start is set.
	dial := func(certs []tls.Certificate, start bool) error {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		cl, err := client.DialContext(ctx, client.Options{HostPort: c.Address, Namespace: "siteops",
			ConnectionOptions: client.ConnectionOptions{TLS: &tls.Config{RootCAs: roots, Certificates: certs, ServerName: frontendName, MinVersion: tls.VersionTLS12}}})
		if err != nil {
			return err
		}
		defer cl.Close()
		if _, err = cl.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "siteops"}); err != nil || !start {
			return err
		}
		run, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "embed-incident/tls-certs-" + strings.Join(certs[0].Leaf.Subject.OrganizationalUnit, ""),
			TaskQueue: policy["SITEOPS_TEMPORAL_TASK_QUEUE"], Priority: temporal.Priority{PriorityKey: 1}}, "EmbedIncident")
		if err != nil {
			return err
		}
		terminate := func(cl client.Client) error {
			return cl.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "TestTLSCertsScript")
		}
		if err := terminate(cl); err == nil {
			return nil
		}
		w, err := client.DialContext(ctx, client.Options{HostPort: c.Address, Namespace: "siteops",
			ConnectionOptions: client.ConnectionOptions{TLS: &tls.Config{RootCAs: roots, Certificates: pair("client"), ServerName: frontendName, MinVersion: tls.VersionTLS12}}})
		if err != nil {
			return err
		}
		defer w.Close()
		if err := terminate(w); err != nil {
			return err
		}
		return errOncallTerminated
	}
	if err := dial(pair("client"), true); err != nil {
		t.Errorf("the worker's client certificate, the frontend verified as %s, starting and ending an incident: %v", frontendName, err)
	}
	if err := dial(pair("alice-oncall"), true); !errors.Is(err, errOncallTerminated) {
		t.Errorf("on-call's certificate starting an incident (and not terminating it): %v", err)
	}
	if err := dial(pair("ingress"), false); err != nil {
		t.Errorf("the ingress's client certificate: %v", err)
	}
	var denied *serviceerror.PermissionDenied
	if err := dial(pair("ingress"), true); !errors.As(err, &denied) {
		t.Errorf("the ingress's client certificate starting a workflow: %v; want PermissionDenied (the role policy)", err)
	}
	// Its first call, the SDK's GetSystemInfo, is refused: the SDK says
	// "unauthorized", the frontend's log why.
	if err := dial(pair("norole"), false); err == nil || !strings.Contains(err.Error(), "unauthorized") {
		t.Errorf("a certificate of the same CA without a role: %v; want refused", err)
	}
	if log, err := os.ReadFile(c.LogFile(cluster.Frontend)); err != nil || !strings.Contains(string(log), "names no role") {
		t.Errorf("the frontend's log does not say the certificate names no role (%v)", err)
	}
	if err := dial(nil, false); err == nil {
		t.Error("a client without a certificate reached the frontend")
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s holds no PEM block", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCertManagerExample checks the cert-manager resources against what
// the manifests mount and tls-certs.sh makes: a CA issued by a self-signed
// namespaced Issuer, an Issuer of that CA in each namespace (no
// ClusterIssuer, which would sign for any namespace), and Certificates
// signed by it, each with its role (OU),
// whose Secrets are the ones the pods mount: temporal-tls in namespace
// temporal for the frontend's Service name (the name every client
// verifies) with the server and client usages, and siteops-temporal-tls and
// siteops-ingress-temporal-tls in namespace siteops with the client usage
// alone.
func TestCertManagerExample(t *testing.T) {
	objs := docs(t, filepath.Join("kubernetes", "cert-manager.example.yaml"))
	certs := map[string]map[string]any{}
	issuers := map[string]map[string]any{}
	for _, o := range objs {
		if str(o["apiVersion"]) != "cert-manager.io/v1" {
			t.Errorf("%s %s: apiVersion %s, want cert-manager.io/v1", o["kind"], dig(o, "metadata", "name"), o["apiVersion"])
		}
		switch str(o["kind"]) {
		case "Certificate":
			certs[str(dig(o, "metadata", "namespace"))+"/"+str(dig(o, "spec", "secretName"))] = o
		case "Issuer":
			issuers[str(dig(o, "metadata", "namespace"))+"/"+str(dig(o, "metadata", "name"))] = o
		default:
			t.Errorf("%s %s: only Certificates and namespaced Issuers belong here", o["kind"], dig(o, "metadata", "name"))
		}
	}
	ca, ok := certs["temporal/siteops-temporal-ca"]
	if !ok || dig(ca, "spec", "isCA") != true || !issuerIs(issuers, ca, "selfSigned") {
		t.Fatalf("no CA certificate issued by a self-signed Issuer in namespace temporal: %v", ca)
	}
	for _, ns := range []string{"temporal", "siteops"} {
		if str(dig(issuers[ns+"/siteops-temporal-ca"], "spec", "ca", "secretName")) != "siteops-temporal-ca" {
			t.Errorf("no Issuer of the CA's Secret in namespace %s", ns)
		}
	}
	cm := docs(t, filepath.Join("kubernetes", "temporal", "configmap.yaml"))[0]
	serverName := str(dig(cm, "data", "TEMPORAL_SERVER_TLS_SERVER_NAME"))
	for _, tc := range []struct {
		secret string
		role   string
		names  []string
		usages []string
	}{
		{"temporal/temporal-tls", "admin", []string{serverName}, []string{"digital signature", "server auth", "client auth"}},
		{"siteops/siteops-temporal-tls", "worker", nil, []string{"digital signature", "client auth"}},
		{"siteops/siteops-ingress-temporal-tls", "ingress", nil, []string{"digital signature", "client auth"}},
	} {
		c, ok := certs[tc.secret]
		if !ok {
			t.Errorf("no Certificate makes the Secret %s", tc.secret)
			continue
		}
		if str(dig(c, "spec", "issuerRef", "name")) != "siteops-temporal-ca" || str(dig(c, "spec", "issuerRef", "kind")) != "Issuer" {
			t.Errorf("%s is not signed by the CA's Issuer of its namespace: %v", tc.secret, dig(c, "spec", "issuerRef"))
		}
		if ous := list(dig(c, "spec", "subject", "organizationalUnits")); len(ous) != 1 || str(ous[0]) != tc.role {
			t.Errorf("%s: organizational units %v, want the role %s alone", tc.secret, ous, tc.role)
		}
		var names, usages []string
		for _, n := range list(dig(c, "spec", "dnsNames")) {
			names = append(names, str(n))
		}
		for _, u := range list(dig(c, "spec", "usages")) {
			usages = append(usages, str(u))
		}
		if strings.Join(names, ",") != strings.Join(tc.names, ",") || strings.Join(usages, ",") != strings.Join(tc.usages, ",") {
			t.Errorf("%s: names %v, usages %v; want %v and %v", tc.secret, names, usages, tc.names, tc.usages)
		}
	}
	if serverName != frontendName {
		t.Errorf("temporal/configmap.yaml verifies the frontend as %q; tls-certs.sh and this file name it %q", serverName, frontendName)
	}
}

// errOncallTerminated says that a certificate could not terminate the
// incident it started, which another certificate then ended.
var errOncallTerminated = errors.New("started, and refused the termination")

// issuerIs says whether c's issuer is an Issuer of c's namespace of the
// given type.
func issuerIs(issuers map[string]map[string]any, c map[string]any, typ string) bool {
	i, ok := issuers[str(dig(c, "metadata", "namespace"))+"/"+str(dig(c, "spec", "issuerRef", "name"))]
	return ok && dig(i, "spec", typ) != nil
}
