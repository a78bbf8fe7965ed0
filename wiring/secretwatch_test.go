package wiring

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/doctor"
	"github.com/siteops/siteops/internal/ports"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// TestPreflightWatchesAWatchedCheck runs a watched check that passes at
// start, then fails, then passes: the process follows it (degraded while
// it fails, /readyz naming the cause), where a check that is not watched
// would have kept its result from start.
func TestPreflightWatchesAWatchedCheck(t *testing.T) {
	var failing atomic.Bool
	c := func(context.Context) doctor.Result {
		if failing.Load() {
			return doctor.Result{Check: "secret key", Status: doctor.Fail, Detail: "1 of 1 active stored secrets do not decrypt", Watch: true}
		}
		return doctor.Result{Check: "secret key", Status: doctor.OK, Detail: "decrypts all 1", Watch: true}
	}
	checks := NewChecks(nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	p := Preflight{RecheckEvery: 10 * time.Millisecond}
	if err := p.start(ctx, "ingress", slog.New(slog.DiscardHandler), checks, c); err != nil || checks.Degraded() {
		t.Fatalf("start = %v, degraded %v; want a start, not degraded", err, checks.Degraded())
	}
	failing.Store(true)
	siteopstest.Eventually(t, 5*time.Second, "the watched check's failure to degrade the process", checks.Degraded)
	if r := checks.Results(); len(r) != 1 || !strings.Contains(r[0].Detail, "do not decrypt") {
		t.Errorf("results = %+v; want the failure's detail", r)
	}
	failing.Store(false)
	siteopstest.Eventually(t, 5*time.Second, "the process to be no longer degraded once the check passes", func() bool { return !checks.Degraded() })
}

// TestIngressReadinessFollowsTheStoredSecrets is the running half of
// issue 33, item 1: an ingress that started beside no stored secret, and
// said so, sees a secret stored afterwards under another key (a worker
// with another SITEOPS_SECRET_KEY) and says on /readyz that none of the
// stored secrets decrypts, naming it — never "decrypts all 0".
func TestIngressReadinessFollowsTheStoredSecrets(t *testing.T) {
	url := storetest.SQLiteURL(t)
	st, err := store.Open(t.Context(), url, store.Options{SecretKey: storetest.TestKey})
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	ps, err := ports.FreeN(2)
	if err != nil {
		t.Fatal(err)
	}
	admin := "127.0.0.1:" + strconv.Itoa(ps[1])
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1") // the ingress dials lazily; never reached here
	for k, v := range map[string]string{"SITEOPS_DATABASE_URL": url, "SITEOPS_SECRET_KEY": base64.StdEncoding.EncodeToString(storetest.TestKey),
		"SITEOPS_INGRESS_ADDR": "127.0.0.1:" + strconv.Itoa(ps[0]), "SITEOPS_INGRESS_ADMIN_ADDR": admin, "SITEOPS_WEBHOOK_SECRETS": ""} {
		t.Setenv(k, v)
	}
	var cfg IngressConfig
	if err := config.Load(&cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- RunIngress(ctx, cfg, slog.New(slog.DiscardHandler), nil, Preflight{RecheckEvery: 20 * time.Millisecond})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunIngress = %v; want it to stop when told", err)
		}
	})
	readyz := func() string {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return ""
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	siteopstest.Eventually(t, 10*time.Second, "/readyz to say no secret is stored", func() bool {
		return strings.Contains(readyz(), "no active webhook secret is stored")
	})

	other, err := store.Open(t.Context(), url, store.Options{SecretKey: []byte("ffffffffffffffffffffffffffffffff")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	if err := other.PutSecret(t.Context(), "we_1", "main", agentsite.NewSigningSecret("whsec_under_another_key")); err != nil {
		t.Fatal(err)
	}
	var body string
	siteopstest.Eventually(t, 10*time.Second, "/readyz to say the stored secret does not decrypt", func() bool {
		body = readyz()
		return strings.Contains(body, `"status":"degraded"`) && strings.Contains(body, "none of the 1 active stored secrets decrypts") && strings.Contains(body, "we_1")
	})
	if strings.Contains(body, "decrypts all") || strings.Contains(body, "whsec_") {
		t.Errorf("/readyz = %s", body)
	}
}
