package nexus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	nexusrpc "github.com/nexus-rpc/sdk-go/nexus"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/store"
)

// fakeVisibility answers as Temporal would: List from what visibility has
// caught up with, Describe from the executions themselves.
type fakeVisibility struct {
	mu      sync.Mutex
	listed  map[string][]string                        // query → running workflow IDs visibility lists
	runs    map[string]enumspb.WorkflowExecutionStatus // workflow ID → status
	listErr error                                      // answered to every List
	lists   int                                        // List calls
	queries []string                                   // their queries
}

func newFakeVisibility() *fakeVisibility {
	return &fakeVisibility{listed: map[string][]string{}, runs: map[string]enumspb.WorkflowExecutionStatus{}}
}

func (f *fakeVisibility) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	f.queries = append(f.queries, req.GetQuery())
	if f.listErr != nil {
		return nil, f.listErr
	}
	resp := &workflowservice.ListWorkflowExecutionsResponse{}
	for _, id := range f.listed[req.GetQuery()] {
		resp.Executions = append(resp.Executions, &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: id}})
	}
	return resp, nil
}

func (f *fakeVisibility) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.runs[id]
	if !ok {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + id)
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: s}}, nil
}

func (f *fakeVisibility) set(f2 func(f *fakeVisibility)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f2(f)
}

func TestCallerKeys(t *testing.T) {
	for _, tt := range []struct {
		name   string
		caller Caller
		want   string
	}{
		{"an endpoint the server names", Caller{Endpoint: "partner-a", AssertedNamespace: "victim"}, "nexus:endpoint:partner-a"},
		{"a namespace the request asserts, without an endpoint", Caller{AssertedNamespace: "partner-a"}, unidentified},
		{"plain HTTP", Caller{}, unidentified},
		{"an endpoint a query would misread", Caller{Endpoint: "x' OR 'a'='a"}, "nexus:endpoint-sha256:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.caller.Key()
			if !strings.HasPrefix(got, tt.want) || strings.ContainsAny(got, `'" `) {
				t.Errorf("Key() = %q, want %q", got, tt.want)
			}
		})
	}
	var log siteopstest.Log
	slog.New(slog.NewTextHandler(&log, nil)).Info("x", "caller", Caller{Endpoint: "partner-a", AssertedNamespace: "ns-a", AssertedWorkflowID: "wf"})
	for _, want := range []string{"caller.key=nexus:endpoint:partner-a", "caller.endpoint=partner-a", "caller.asserted_namespace=ns-a", "caller.asserted_workflow_id=wf"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log line %q lacks %q", log.String(), want)
		}
	}
}

func TestSearchAttributeIsRegisteredOnTheDevServer(t *testing.T) {
	if got := devserver.SearchAttributes[SearchAttrCaller]; got != "Keyword" {
		t.Errorf("the dev server registers %s as %q, want Keyword", SearchAttrCaller, got)
	}
}

// TestRunningCountsVisibilityAndThisProcessesStarts counts what visibility
// lists and what this process started that it does not list yet, and
// forgets a start once visibility lists it or it ended.
func TestRunningCountsVisibilityAndThisProcessesStarts(t *testing.T) {
	const key = "nexus:endpoint:partner-a"
	v := newFakeVisibility()
	v.listed[runningQuery(key)] = []string{"onboarding/other"}
	v.runs["onboarding/other"] = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	r := newRunning(func() time.Time { return now })

	done, n, err := r.admit(t.Context(), v, key, 2)
	if err != nil || n != 1 {
		t.Fatalf("admit = %d, %v; want 1 running and a place", n, err)
	}
	v.set(func(v *fakeVisibility) { v.runs["onboarding/mine"] = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING })
	done("onboarding/mine")
	// Visibility has not caught up with onboarding/mine: it is counted
	// from the execution itself.
	if _, n, err := r.admit(t.Context(), v, key, 2); !errors.Is(err, errTooManyRunning) || n != 2 {
		t.Errorf("admit with one listed and one just started = %d, %v; want 2 and errTooManyRunning", n, err)
	}
	// Once it has ended it no longer counts.
	v.set(func(v *fakeVisibility) { v.runs["onboarding/mine"] = enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED })
	done, n, err = r.admit(t.Context(), v, key, 2)
	if err != nil || n != 1 {
		t.Fatalf("admit after it completed = %d, %v; want 1", n, err)
	}
	done("")
	if p := r.pendingOf(key); len(p) != 0 {
		t.Errorf("still pending: %v", p)
	}
	// A start that visibility lists is forgotten, and counted once.
	done, _, _ = r.admit(t.Context(), v, key, 3)
	v.set(func(v *fakeVisibility) {
		v.runs["onboarding/listed"] = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
		v.listed[runningQuery(key)] = append(v.listed[runningQuery(key)], "onboarding/listed")
	})
	done("onboarding/listed")
	done, n, err = r.admit(t.Context(), v, key, 3)
	if err != nil || n != 2 || len(r.pendingOf(key)) != 0 {
		t.Errorf("admit = %d, %v, pending %v; want 2 counted once and nothing pending", n, err, r.pendingOf(key))
	}
	done("")
	// A start visibility never shows is forgotten after pendingFor.
	done, _, _ = r.admit(t.Context(), v, key, 5)
	done("onboarding/lost")
	now = now.Add(pendingFor + time.Second)
	if p := r.pendingOf(key); len(p) != 0 {
		t.Errorf("pending after %s: %v", pendingFor, p)
	}
	// Another caller's onboardings are not this one's.
	if _, n, err := r.admit(t.Context(), v, unidentified, 1); err != nil || n != 0 {
		t.Errorf("another key: %d, %v; want 0", n, err)
	}
	for _, q := range v.queries {
		if !strings.Contains(q, "WorkflowType = 'Onboarding'") || !strings.Contains(q, "ExecutionStatus = 'Running'") || !strings.Contains(q, SearchAttrCaller+" = '") {
			t.Errorf("query %q", q)
		}
	}
}

// TestRunningAdmissionsTakeTurns shows that while one request of a caller
// is between its count and its start, another of the same caller waits:
// given a context that has ended, it gives up without counting.
func TestRunningAdmissionsTakeTurns(t *testing.T) {
	v := newFakeVisibility()
	r := newRunning(time.Now)
	done, _, err := r.admit(t.Context(), v, "k", 1)
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := r.admit(ended, v, "k", 1); !errors.Is(err, context.Canceled) || v.lists != 1 {
		t.Errorf("a second admission during the first's turn = %v after %d List calls; want it to wait (context.Canceled, 1 call)", err, v.lists)
	}
	if d, _, err := r.admit(ended, v, "other", 1); err == nil {
		d("") // another caller does not wait (the select may still see the ended context first)
	}
	v.runs["onboarding/a"] = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	done("onboarding/a")
	if _, _, err := r.admit(t.Context(), v, "k", 1); !errors.Is(err, errTooManyRunning) {
		t.Errorf("after the first started: %v; want errTooManyRunning", err)
	}
}

func TestAdmitRefusesPastTheLimitButNeverAJoin(t *testing.T) {
	const id = "onboarding/new"
	for _, tt := range []struct {
		name      string
		caller    Caller
		existing  enumspb.WorkflowExecutionStatus // 0: none
		wantLimit bool                            // the limit applies
		setting   string
	}{
		{"a new slug from an endpoint", Caller{Endpoint: "partner-a"}, 0, true, "SITEOPS_NEXUS_MAX_RUNNING_ONBOARDINGS"},
		{"a new slug without an endpoint", Caller{AssertedNamespace: "partner-a"}, 0, true, "SITEOPS_NEXUS_SHARED_MAX_RUNNING_ONBOARDINGS"},
		{"a slug whose onboarding failed", Caller{}, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, true, "SITEOPS_NEXUS_SHARED_MAX_RUNNING_ONBOARDINGS"},
		{"a join of the slug's running onboarding", Caller{}, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, false, ""},
		{"a slug onboarded before", Caller{}, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log siteopstest.Log
			s, err := New(Options{Texts: texts{}, MaxRunning: 2, SharedMaxRunning: 1, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			v := newFakeVisibility()
			if tt.existing != 0 {
				v.runs[id] = tt.existing
			}
			// The caller has as many running as either limit allows.
			v.listed[runningQuery(tt.caller.Key())] = []string{"onboarding/a", "onboarding/b"}
			done, err := s.admit(t.Context(), v, tt.caller, id)
			if !tt.wantLimit {
				if err != nil || v.lists != 0 {
					t.Fatalf("admit = %v after %d List calls; want it admitted without a count", err, v.lists)
				}
				done("")
				return
			}
			var he *nexusrpc.HandlerError
			var app *temporal.ApplicationError
			if !errors.As(err, &he) || he.Type != nexusrpc.HandlerErrorTypeResourceExhausted || he.Retryable() ||
				!errors.As(err, &app) || app.Type() != api.ErrTypeTooManyOnboardings {
				t.Fatalf("admit = %#v; want a non-retryable RESOURCE_EXHAUSTED of type %s", err, api.ErrTypeTooManyOnboardings)
			}
			if !strings.Contains(app.Message(), tt.setting) || !strings.Contains(app.Message(), "onboardings running") {
				t.Errorf("the refusal %q does not name %s", app.Message(), tt.setting)
			}
			if !strings.Contains(log.String(), "running onboardings") || !strings.Contains(log.String(), "caller.key="+tt.caller.Key()) {
				t.Errorf("the refusal is not logged with its caller:\n%s", log.String())
			}
		})
	}
}

func TestAdmitWithoutTheSearchAttribute(t *testing.T) {
	s, _ := New(Options{Texts: texts{}, MaxRunning: 5, Logger: slog.New(slog.DiscardHandler)})
	v := newFakeVisibility()
	v.listErr = serviceerror.NewInvalidArgument(fmt.Sprintf("invalid query: column name '%s' is not a valid search attribute", SearchAttrCaller))
	_, err := s.admit(t.Context(), v, Caller{}, "onboarding/x")
	var he *nexusrpc.HandlerError
	if !errors.As(err, &he) || he.Type != nexusrpc.HandlerErrorTypeUnavailable || !he.Retryable() ||
		!strings.Contains(he.Message, "search-attribute create --name "+SearchAttrCaller+" --type Keyword") {
		t.Errorf("admit = %#v; want a retryable UNAVAILABLE naming the command that registers %s", err, SearchAttrCaller)
	}
	off, _ := New(Options{Texts: texts{}})
	if _, err := off.admit(t.Context(), v, Caller{}, "onboarding/x"); err != nil || v.lists != 1 {
		t.Errorf("without a limit: %v after %d List calls; want no count", err, v.lists)
	}
}

// quotaTexts records the quota each text is stored within, and refuses
// one past its PerOwner as the store does.
type quotaTexts struct {
	texts
	owners []string
}

func (q *quotaTexts) PutKnowledgeTextAs(ctx context.Context, owner, text string, quota store.TextQuota) (string, error) {
	q.owners = append(q.owners, fmt.Sprintf("%s/%d", owner, quota.PerOwner))
	if quota.PerOwner > 0 && int64(len(text)) > quota.PerOwner {
		return "", fmt.Errorf("%w: %s keeps 0 of its %d bytes of texts, and this one is %d", store.ErrQuotaExceeded, owner, quota.PerOwner, len(text))
	}
	return q.texts.PutKnowledgeText(ctx, text)
}

func TestTextQuotaIsKeyedOnTheEndpoint(t *testing.T) {
	st := &quotaTexts{texts: texts{}}
	s, _ := New(Options{Texts: st, Quota: store.TextQuota{PerOwner: 100, Total: 1000}, SharedTextQuota: 10, Logger: slog.New(slog.DiscardHandler)})
	text := strings.Repeat("a", 50)
	if _, err := s.putText(t.Context(), Caller{Endpoint: "partner-a", AssertedNamespace: "victim"}, api.StoreKnowledgeName, text); err != nil {
		t.Errorf("a text within the endpoint's quota: %v", err)
	}
	_, err := s.putText(t.Context(), Caller{AssertedNamespace: "partner-a"}, api.StoreKnowledgeName, text)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != api.ErrTypeQuotaExceeded || !strings.Contains(app.Message(), "SITEOPS_NEXUS_SHARED_TEXT_QUOTA") {
		t.Errorf("a text past the shared bucket: %v; want %s naming SITEOPS_NEXUS_SHARED_TEXT_QUOTA", err, api.ErrTypeQuotaExceeded)
	}
	if want := []string{"nexus:endpoint:partner-a/100", unidentified + "/10"}; strings.Join(st.owners, ",") != strings.Join(want, ",") {
		t.Errorf("texts stored as %v, want %v", st.owners, want)
	}
	// Without a shared quota of its own, the shared bucket has the
	// per-caller one.
	d, _ := New(Options{Texts: st, Quota: store.TextQuota{PerOwner: 100}})
	if d.o.SharedTextQuota != 100 {
		t.Errorf("SharedTextQuota = %d, want SITEOPS_NEXUS_TEXT_QUOTA's 100", d.o.SharedTextQuota)
	}
}
