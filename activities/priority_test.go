package activities_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"iter"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/workflows"
)

// playbookKinds are the only kinds whose calls wait in the playbook class
// (issue 45, item 4).
var playbookKinds = []string{workflows.EmbedIncidentKind.Name, workflows.SecretRotationKind.Name}

// info is an activity's info in a run of workflowType started with
// priority p.
func info(workflowType string, p temporal.Priority) activity.Info {
	return activity.Info{
		WorkflowType:      &workflow.Type{Name: workflowType},
		WorkflowExecution: workflow.Execution{ID: "wf-id", RunID: "run-id"},
		Priority:          p,
	}
}

// TestCallClassIsTheWorkflowTypes checks every kind of the catalogue with
// every priority key a run may be started with and every class a call
// site names: the class is the kind's, lowered to the call site's, and
// the playbook class only for the incident and the rotation.
func TestCallClassIsTheWorkflowTypes(t *testing.T) {
	named := []agentsite.Class{agentsite.ClassPlaybook, agentsite.ClassOnboarding, agentsite.ClassBulk}
	for _, k := range workflows.Catalogue {
		for _, n := range named {
			var first agentsite.Class
			for key := range 6 { // 0 is unset; 1 to 5 any starter may give
				got := activities.CallPriority(workflows.ClassOf, info(k.Name, temporal.Priority{PriorityKey: key}), n).Class
				if key == 0 {
					first = got
				} else if got != first {
					t.Errorf("%s, call site %s: priority key %d gives class %s, key 0 %s; want the same whatever the key", k.Name, n, key, got, first)
				}
				playbook := slices.Contains(playbookKinds, k.Name)
				if (got == agentsite.ClassPlaybook) != playbook {
					t.Errorf("%s, call site %s, priority key %d: class %s; want playbook %v", k.Name, n, key, got, playbook)
				}
				if !playbook && got < n {
					t.Errorf("%s, call site %s: class %s is more urgent than the call site's", k.Name, n, got)
				}
				if got < k.Class {
					t.Errorf("%s, call site %s: class %s is more urgent than the kind's %s", k.Name, n, got, k.Class)
				}
			}
		}
	}
}

// TestALeadSyncStartedAsAPlaybookCallsAsBulk: anyone who may start a lead
// sync may give it priority key 1 and any fairness key; its calls still
// wait as bulk, under that fairness key.
func TestALeadSyncStartedAsAPlaybookCallsAsBulk(t *testing.T) {
	for _, tc := range []struct {
		name         string
		workflowType string
		named        agentsite.Class
	}{
		{"lead sync's page read", workflows.LeadSyncKind.Name, agentsite.ClassBulk},
		{"lead sync naming playbook", workflows.LeadSyncKind.Name, agentsite.ClassPlaybook},
		{"a type the catalogue does not list", "EmbedIncidentX", agentsite.ClassPlaybook},
		{"no workflow type", "", agentsite.ClassPlaybook},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := info(tc.workflowType, temporal.Priority{PriorityKey: int(agentsite.ClassPlaybook), FairnessKey: "site_invented"})
			if tc.workflowType == "" {
				in.WorkflowType = nil
			}
			got := activities.CallPriority(workflows.ClassOf, in, tc.named)
			if got.Class != agentsite.ClassBulk {
				t.Errorf("class = %s; want bulk: a run's priority key is not the code's class", got.Class)
			}
			if got.Key != "site_invented" {
				t.Errorf("key = %q; want the run's fairness key", got.Key)
			}
		})
	}
	if got := activities.CallPriority(nil, info(workflows.EmbedIncidentKind.Name, temporal.Priority{}), agentsite.ClassPlaybook); got.Class != agentsite.ClassBulk || got.Key != "wf-id" {
		t.Errorf("without Classes: %+v; want bulk keyed by the workflow ID", got)
	}
}

// recordingAPI records the class of every call and fails it.
type recordingAPI struct {
	mu    sync.Mutex
	calls []string // "Method class"
}

var errRecorded = errors.New("recorded, not sent")

func (r *recordingAPI) record(ctx context.Context, method string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, method+" "+agentsite.PriorityFrom(ctx).Class.String())
}

func (r *recordingAPI) recorded() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *recordingAPI) CreateSite(ctx context.Context, _ string, _ agentsite.NewSite) (*agentsite.CreatedSite, error) {
	r.record(ctx, "CreateSite")
	return nil, errRecorded
}

func (r *recordingAPI) UpdateAgent(ctx context.Context, _, _ string, _ agentsite.AgentUpdate) (*agentsite.Agent, error) {
	r.record(ctx, "UpdateAgent")
	return nil, errRecorded
}

func (r *recordingAPI) AddKnowledge(ctx context.Context, _, _ string, _ agentsite.KnowledgeSource) (*agentsite.Knowledge, error) {
	r.record(ctx, "AddKnowledge")
	return nil, errRecorded
}

func (r *recordingAPI) AddFAQ(ctx context.Context, _, _ string, _ agentsite.FAQ) (*agentsite.FAQ, error) {
	r.record(ctx, "AddFAQ")
	return nil, errRecorded
}

func (r *recordingAPI) Publish(ctx context.Context, _, _ string, _ bool) (*agentsite.PublishResult, error) {
	r.record(ctx, "Publish")
	return nil, errRecorded
}

func (r *recordingAPI) LeadPages(ctx context.Context, _ string, _ agentsite.ListLeadsOptions) iter.Seq2[*agentsite.LeadPage, error] {
	r.record(ctx, "LeadPages")
	return func(yield func(*agentsite.LeadPage, error) bool) { yield(nil, errRecorded) }
}

func (r *recordingAPI) CreateWebhookEndpoint(ctx context.Context, _ string, _ agentsite.NewWebhookEndpoint) (*agentsite.CreatedWebhookEndpoint, error) {
	r.record(ctx, "CreateWebhookEndpoint")
	return nil, errRecorded
}

func (r *recordingAPI) ListWebhookEndpoints(ctx context.Context) ([]agentsite.WebhookEndpoint, error) {
	r.record(ctx, "ListWebhookEndpoints")
	return nil, errRecorded
}

func (r *recordingAPI) DeleteWebhookEndpoint(ctx context.Context, _, _ string) error {
	r.record(ctx, "DeleteWebhookEndpoint")
	return errRecorded
}

// classRow is one activity run by one workflow type, and the class its
// call to the API must wait as.
type classRow struct {
	activity string
	kind     workflows.Kind
	local    bool // run as a local activity (the incident's PATCH)
	in       []any
	call     string
	want     agentsite.Class
}

// classRows is every activity that calls the API under every workflow
// type that runs it; TestClassRowsCoverEveryCallSite keeps it whole.
func classRows() []classRow {
	embed := activities.SetEmbedInput{IdempotencyKey: "k", SiteID: "site_1"}
	create := activities.CreateEndpointInput{IdempotencyKey: "k", URL: "http://127.0.0.1:1/webhooks/main", Events: []string{"lead.created"}, Receiver: "main"}
	return []classRow{
		{"SetEmbed", workflows.EmbedIncidentKind, false, []any{embed}, "UpdateAgent", agentsite.ClassPlaybook},
		{"SetEmbed", workflows.EmbedIncidentKind, true, []any{embed}, "UpdateAgent", agentsite.ClassPlaybook},
		{"CreateSite", workflows.OnboardingKind, false, []any{activities.CreateSiteInput{IdempotencyKey: "k", WorkflowID: "onboarding/acme"}}, "CreateSite", agentsite.ClassOnboarding},
		{"UpdateAgent", workflows.OnboardingKind, false, []any{activities.UpdateAgentInput{IdempotencyKey: "k", SiteID: "site_1"}}, "UpdateAgent", agentsite.ClassOnboarding},
		{"AddKnowledge", workflows.OnboardingKind, false, []any{activities.AddKnowledgeInput{IdempotencyKey: "k", SiteID: "site_1", Name: "Guide", Text: "Anvils."}}, "AddKnowledge", agentsite.ClassBulk},
		{"AddFAQ", workflows.OnboardingKind, false, []any{activities.AddFAQInput{IdempotencyKey: "k", SiteID: "site_1"}}, "AddFAQ", agentsite.ClassBulk},
		{"Publish", workflows.OnboardingKind, false, []any{activities.PublishInput{IdempotencyKey: "k", SiteID: "site_1", Published: true}}, "Publish", agentsite.ClassOnboarding},
		{"SyncLeads", workflows.LeadSyncKind, false, []any{activities.SyncLeadsInput{SiteID: "site_1"}}, "LeadPages", agentsite.ClassBulk},
		{"SyncSiteLeads", workflows.LeadEventsKind, false, []any{activities.SyncSiteLeadsInput{Key: "lead-events/0/1", Sites: []activities.SiteLeadEvents{{SiteID: "site_1"}}}}, "LeadPages", agentsite.ClassBulk},
		{"SweepLeads", workflows.LeadSweepKind, false, []any{activities.SweepLeadsInput{}}, "LeadPages", agentsite.ClassBulk},
		{"FindEndpoint", workflows.SecretRotationKind, false, []any{activities.FindEndpointInput{EndpointID: "we_stored"}}, "ListWebhookEndpoints", agentsite.ClassPlaybook},
		{"CreateEndpoint", workflows.SecretRotationKind, false, []any{create}, "CreateWebhookEndpoint", agentsite.ClassPlaybook},
		{"CreateEndpoint", workflows.EndpointRegistrationKind, false, []any{create}, "CreateWebhookEndpoint", agentsite.ClassOnboarding},
		{"DeleteEndpoint", workflows.SecretRotationKind, false, []any{activities.DeleteEndpointInput{IdempotencyKey: "k", EndpointID: "we_stored"}}, "DeleteWebhookEndpoint", agentsite.ClassPlaybook},
		{"FindCreatedEndpoint", workflows.SecretRotationKind, false, []any{activities.FindCreatedInput{KeyPrefix: "created-by-", URL: create.URL, Receiver: "main"}}, "ListWebhookEndpoints", agentsite.ClassPlaybook},
		{"ReconcileSecrets", workflows.SecretReconcileKind, false, nil, "ListWebhookEndpoints", agentsite.ClassBulk},
	}
}

// TestEveryActivityCallsInItsWorkflowsClass runs each activity that calls
// the API in a workflow of each type that runs it, as a worker runs it,
// and checks the class its call waited as.
func TestEveryActivityCallsInItsWorkflowsClass(t *testing.T) {
	for _, row := range classRows() {
		name := row.activity + " in " + row.kind.Name
		if row.local {
			name += " (local)"
		}
		t.Run(name, func(t *testing.T) {
			st := storetest.Open(t, store.SQLite)
			ctx := t.Context()
			// What the activities read before they call: a stored secret
			// (FindCreatedEndpoint, ReconcileSecrets) and a finished sync
			// (SweepLeads).
			if err := st.PutSecretFrom(ctx, "we_stored", "main", "created-by-1", agentsite.NewSigningSecret("whsec_class_test")); err != nil {
				t.Fatal(err)
			}
			if _, err := st.UpsertLeadsAt(ctx, "site_1", "lead-sync/site_1", nil, store.LeadSyncPosition{Done: true, LastPageAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			api := &recordingAPI{}
			acts := activities.New(activities.Options{API: api, Store: st, Receivers: activities.ReceiverPolicy{AllowLoopback: true}, Classes: workflows.ClassOf})
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterActivity(acts)
			env.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
				if row.local {
					ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
						StartToCloseTimeout: 10 * time.Second, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
					})
					return workflow.ExecuteLocalActivity(ctx, acts.SetEmbed, row.in...).Get(ctx, nil)
				}
				ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
					StartToCloseTimeout: 10 * time.Second, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
				})
				return workflow.ExecuteActivity(ctx, row.activity, row.in...).Get(ctx, nil)
			}, workflow.RegisterOptions{Name: row.kind.Name})
			env.ExecuteWorkflow(row.kind.Name)
			want := []string{row.call + " " + row.want.String()}
			if got := api.recorded(); !slices.Equal(got, want) {
				t.Errorf("calls = %v; want %v", got, want)
			}
		})
	}
}

// TestClassRowsCoverEveryCallSite reads the sources: every exported method
// of Activities that reaches a call to the API (a.calling) has rows for
// every workflow type whose code runs it, and no more.
func TestClassRowsCoverEveryCallSite(t *testing.T) {
	callers := apiActivities(t)
	if len(callers) == 0 {
		t.Fatal("found no activity that calls the API; the source scan is broken")
	}
	want, run := map[string]bool{}, map[string]bool{}
	for typ, acts := range workflowActivities(t) {
		for _, a := range acts {
			if callers[a] {
				want[a+" in "+typ], run[a] = true, true
			}
		}
	}
	for a := range callers {
		if !run[a] {
			t.Errorf("activity %s calls the API, but no workflow runs it", a)
		}
	}
	got := map[string]bool{}
	for _, r := range classRows() {
		got[r.activity+" in "+r.kind.Name] = true
	}
	for k := range want {
		if !got[k] {
			t.Errorf("no row of classRows for %s: add it with the class its call must wait as", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("classRows has %s, which no workflow's code runs (or which calls no API)", k)
		}
	}
}

// parseDir parses the non-test Go files of dir.
func parseDir(t *testing.T, dir string) (*token.FileSet, []*ast.File) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}

// apiActivities returns the exported methods of Activities that call
// a.calling, directly or through the methods they call.
func apiActivities(t *testing.T) map[string]bool {
	t.Helper()
	_, files := parseDir(t, ".")
	calls := map[string][]string{} // method -> methods of the receiver it calls
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 || len(fn.Recv.List[0].Names) != 1 || fn.Body == nil {
				continue
			}
			recv := fn.Recv.List[0].Names[0].Name
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == recv {
						calls[fn.Name.Name] = append(calls[fn.Name.Name], sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
	reaches := map[string]bool{"calling": true}
	for changed := true; changed; {
		changed = false
		for m, callees := range calls {
			if !reaches[m] && slices.ContainsFunc(callees, func(c string) bool { return reaches[c] }) {
				reaches[m], changed = true, true
			}
		}
	}
	out := map[string]bool{}
	for m := range reaches {
		if ast.IsExported(m) {
			out[m] = true
		}
	}
	return out
}

// workflowActivities returns, for each workflow type of package workflows,
// the activities its file runs (workflow.ExecuteActivity or
// ExecuteLocalActivity of a.Method): a workflow's file declares its
// type's name as a constant ending in WorkflowName.
func workflowActivities(t *testing.T) map[string][]string {
	t.Helper()
	fset, files := parseDir(t, filepath.Join("..", "workflows"))
	out := map[string][]string{}
	for _, f := range files {
		typ := ""
		var acts []string
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if strings.HasSuffix(id.Name, "WorkflowName") && i < len(n.Values) {
						if lit, ok := n.Values[i].(*ast.BasicLit); ok {
							typ, _ = strconv.Unquote(lit.Value)
						}
					}
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "ExecuteActivity" && sel.Sel.Name != "ExecuteLocalActivity") || len(n.Args) < 2 {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "workflow" {
					return true
				}
				if a, ok := n.Args[1].(*ast.SelectorExpr); ok {
					acts = append(acts, a.Sel.Name)
				}
			}
			return true
		})
		if len(acts) == 0 {
			continue
		}
		if typ == "" {
			t.Fatalf("%s runs activities %v but declares no …WorkflowName constant: say which workflow type runs them", fset.Position(f.Pos()).Filename, acts)
		}
		out[typ] = append(out[typ], acts...)
	}
	return out
}
