package devserver

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/starter"
)

// TestRestart restarts a server: it answers again on the same address,
// for the namespace it started with, and a client dialled before the
// restart reaches it once its connection is back, without dialling again.
// Its HTTP API answers on the address Server names, before and after.
func TestRestart(t *testing.T) {
	if _, err := FindCLI(); err != nil {
		if os.Getenv("SITEOPS_REQUIRE_TEMPORAL") != "" {
			t.Fatal(err)
		}
		t.Skipf("SKIP: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{Namespaces: []string{"restarted"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	c, err := client.DialContext(ctx, client.Options{HostPort: s.Address, Namespace: "restarted", Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	httpAnswers(ctx, t, s.HTTPAddress, "restarted")
	address, pid := s.Address, s.cmd.Process.Pid
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	httpAnswers(ctx, t, s.HTTPAddress, "restarted")
	if s.Address != address || s.cmd.Process.Pid == pid {
		t.Fatalf("after the restart: %s (pid %d), want %s in a new process (was pid %d)", s.Address, s.cmd.Process.Pid, address, pid)
	}
	// The old connection reconnects on gRPC's backoff (1 s at first).
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "restarted"})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the namespace 15 s after the restart: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.Stop()
	select {
	case <-s.done:
	default:
		t.Error("the restarted server still runs after Stop")
	}
}

// httpAnswers waits up to 15 s for the HTTP API at addr to describe
// namespace ns.
func httpAnswers(ctx context.Context, t *testing.T, addr, ns string) {
	t.Helper()
	url := "http://" + addr + "/api/v1/namespaces/" + ns
	deadline := time.Now().Add(15 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("%s answered %s", url, resp.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the HTTP API at %s 15 s after the start: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestREADMEStartsTheDevServerAsTheTestsDo holds the README's "run it by
// hand" command to what Start gives every dev server: the search
// attributes siteops sets and Task Queue Priority and Fairness.
func TestREADMEStartsTheDevServerAsTheTestsDo(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "temporal server start-dev")
	if i < 0 {
		t.Fatal("the README does not start a dev server")
	}
	command := readme[i:]
	command = command[:strings.Index(command, "\n# 2.")]
	for name, kind := range SearchAttributes {
		if !strings.Contains(command, "--search-attribute "+name+"="+kind) {
			t.Errorf("the README's dev server lacks --search-attribute %s=%s", name, kind)
		}
	}
	for key, value := range Dynamic {
		if strings.HasPrefix(key, "matching.") && !strings.Contains(command, "--dynamic-config-value "+key+"="+value) {
			t.Errorf("the README's dev server lacks --dynamic-config-value %s=%s", key, value)
		}
	}
}

// TestSearchAttributesAreTheStarters holds the dev server's list to the
// one siteops uses, starter.SearchAttributes, type for type, as the CLI's
// --search-attribute names the type.
func TestSearchAttributesAreTheStarters(t *testing.T) {
	want := map[string]string{}
	for name, typ := range starter.SearchAttributes {
		kind := strings.TrimPrefix(typ.String(), "INDEXED_VALUE_TYPE_")
		want[name] = kind[:1] + strings.ToLower(kind[1:])
	}
	if !maps.Equal(SearchAttributes, want) {
		t.Errorf("devserver.SearchAttributes = %v; starter.SearchAttributes makes %v", SearchAttributes, want)
	}
}
