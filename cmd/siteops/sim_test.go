package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/internal/siteopstest"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func TestSimServesOnTheGivenAddress(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	root := newCLI().root()
	var out, errOut siteopstest.Log
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"sim", "--addr", addr, "--key", "svc_live_cli=*", "--key", "svc_live_ro=sites:read,leads:read",
		"--admin-token", "adm", "--allow-loopback-receivers", "--time-scale", "100", "--seed", "5"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	base := "http://" + addr
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/_sim/healthz")
		if err == nil {
			_ = resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the simulator did not come up on %s: %v", addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(out.String(), addr) {
		t.Errorf("start-up line %q does not name the address", out.String())
	}
	if !strings.Contains(errOut.String(), "TEST MODE") {
		t.Errorf("loopback receivers were not announced loudly: %q", errOut.String())
	}

	c, err := agentsite.NewClient(base, "svc_live_cli")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := c.CreateSite(ctx, "cli-site", agentsite.NewSite{Title: "CLI", Slug: "cli", Type: "business", Template: "minimal"})
	if err != nil || cs.Site.ID == "" {
		t.Fatalf("CreateSite over the served simulator: %+v, %v", cs, err)
	}
	ro, _ := agentsite.NewClient(base, "svc_live_ro")
	_, err = ro.Publish(ctx, "ro", cs.Site.ID, true)
	var apiErr *agentsite.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 403 {
		t.Errorf("a read-only key publishing: %v", err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("sim returned %v after cancellation", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sim did not stop")
	}
}

func TestSimRefusesBadFlags(t *testing.T) {
	for name, args := range map[string][]string{
		"no key":        {"sim", "--addr", "127.0.0.1:0"},
		"key no scopes": {"sim", "--addr", "127.0.0.1:0", "--key", "tok"},
		"bad scope":     {"sim", "--addr", "127.0.0.1:0", "--key", "tok=sites:destroy"},
		"bad rate":      {"sim", "--addr", "127.0.0.1:0", "--key", "tok=*", "--fault-error-rate", "3"},
		"bad limit":     {"sim", "--addr", "127.0.0.1:0", "--key", "tok=*", "--rate-limit", "-1"},
		"bad burst":     {"sim", "--addr", "127.0.0.1:0", "--key", "tok=*", "--rate-limit", "5", "--rate-limit-burst", "-1"},
	} {
		if _, err := runCLI(t, "", args...); err == nil {
			t.Errorf("%s: sim started", name)
		}
	}
}

func TestSimFaultFlagsReachTheSimulator(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	root := newCLI().root()
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"sim", "--addr", addr, "--key", "k=*", "--admin-token", "adm",
		"--fault-error-rate", "0.1", "--fault-rate-limit-rate", "0.2", "--fault-retry-after", "7s", "--fault-latency", "1ms",
		"--fault-drop-rate", "0.3", "--fault-duplicate-rate", "0.4", "--fault-reorder-window", "2s",
		"--fault-delay-rate", "0.5", "--fault-delay", "3s", "--rate-limit", "12.5", "--rate-limit-burst", "3"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sim returned %v after cancellation", err)
		}
	}()

	var body []byte
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/_sim/faults", nil)
		req.Header.Set("Authorization", "Bearer adm")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the simulator did not come up: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	want := `{"data":{"error_rate":0.1,"rate_limit_rate":0.2,"retry_after":"7s","rate_limit_rps":12.5,"rate_limit_burst":3,"latency":"1ms","drop_rate":0.3,"duplicate_rate":0.4,"reorder_window":"2s","delay_rate":0.5,"delay":"3s"}}`
	if strings.TrimSpace(string(body)) != want {
		t.Errorf("faults = %s\nwant     %s", body, want)
	}
}

func TestSimRateLimitFlagThrottlesEachKey(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	root := newCLI().root()
	var out siteopstest.Log
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"sim", "--addr", addr, "--key", "k1=*", "--key", "k2=*", "--rate-limit", "0.5"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sim returned %v after cancellation", err)
		}
	}()

	get := func(key string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/api/v1/webhook-endpoints", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		return resp, err
	}
	deadline := time.Now().Add(10 * time.Second)
	first, err := get("k1")
	for err != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the simulator did not come up: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
		first, err = get("k1")
	}
	if first.StatusCode != http.StatusOK {
		t.Fatalf("first request = %d", first.StatusCode)
	}
	// At 0.5 per second with a burst of 1, the next token is 2 s away.
	second, err := get("k1")
	if err != nil || second.StatusCode != http.StatusTooManyRequests || second.Header.Get("Retry-After") != "2" {
		t.Fatalf("second request: %v %v, want 429 with Retry-After 2", second, err)
	}
	if other, err := get("k2"); err != nil || other.StatusCode != http.StatusOK {
		t.Errorf("another key: %v %v, want 200", other, err)
	}
	if !strings.Contains(out.String(), "rate limit 0.5/s per key, burst 1") {
		t.Errorf("start-up line %q does not announce the rate limit", out.String())
	}
}
