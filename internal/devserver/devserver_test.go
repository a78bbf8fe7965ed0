package devserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/starter"
)

// TestStartAndStop starts a server: it answers for the namespace it
// started with, on gRPC and on its HTTP API at the address Server names,
// PID is its process, and Stop ends it. (Servers are never restarted:
// one in memory would forget the workflows of the tests running on it.)
func TestStartAndStop(t *testing.T) {
	if _, err := FindCLI(); errors.Is(err, ErrCLIMissing) {
		siteopstest.Missing(t, siteopstest.RequireTemporal, "%v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{Namespaces: []string{"started"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	c, err := client.DialContext(ctx, client.Options{HostPort: s.Address, Namespace: "started", Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "started"}); err != nil {
		t.Fatalf("the namespace it started with: %v", err)
	}
	httpAnswers(ctx, t, s.HTTPAddress, "started")
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", s.PID())); err != nil || !strings.Contains(string(cmdline), "start-dev") {
		t.Errorf("PID %d is not the dev server (%q, %v)", s.PID(), cmdline, err)
	}
	s.Stop()
	select {
	case <-s.done:
	default:
		t.Error("the server still runs after Stop")
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
