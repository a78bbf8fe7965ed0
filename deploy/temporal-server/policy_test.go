package main

import (
	"context"
	"crypto/x509/pkix"
	"strings"
	"testing"
	"time"

	commandpb "go.temporal.io/api/command/v1"
	commonpb "go.temporal.io/api/common/v1"
	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/authorization"
	"google.golang.org/protobuf/types/known/durationpb"
)

// env is a getenv over a map.
func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// settings are the role policy's settings as siteops' deployment gives
// them (deploy/kubernetes/temporal/configmap.yaml).
var settings = map[string]string{
	NamespaceEnv:    "siteops",
	TaskQueueEnv:    "siteops",
	RelayStartsEnv:  "LeadEvents=lead-events/@5, LeadSync=lead-sync/@5",
	RelaySignalsEnv: "lead-events/:site-leads,lead-sync/:leads-created,onboarding/:knowledge-ready,onboarding/:site-status,secret-rotation/:verified-delivery",
	OncallStartsEnv: "EmbedIncident=embed-incident/@1,SecretRotation=secret-rotation/@1,LeadSync=lead-sync/@5,Onboarding=onboarding/@3",
}

func policy(t *testing.T) *Policy {
	t.Helper()
	p, err := ParsePolicy(env(settings))
	if err != nil || p == nil {
		t.Fatalf("ParsePolicy = %v, %v", p, err)
	}
	return p
}

func TestParsePolicy(t *testing.T) {
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for k, v := range settings {
			m[k] = v
		}
		m[k] = v
		return m
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		on      bool
		wantErr string
	}{
		{"unset: the upstream server", nil, false, ""},
		{"siteops' settings", settings, true, ""},
		{"the retired signal-only setting", with("SITEOPS_TEMPORAL_SIGNAL_ONLY", "siteops-ingress"), false, "SITEOPS_TEMPORAL_SIGNAL_ONLY is retired"},
		{"the retired start types", map[string]string{"SITEOPS_TEMPORAL_SIGNAL_START_TYPES": "LeadSync"}, false, "is retired"},
		{"starts without a namespace", map[string]string{RelayStartsEnv: "LeadSync=lead-sync/@5"}, false, NamespaceEnv + " is not"},
		{"a start without a priority", with(RelayStartsEnv, "LeadSync=lead-sync/"), false, "is not Type=prefix@priority"},
		{"a start at priority 0", with(OncallStartsEnv, "LeadSync=lead-sync/@0"), false, "is not Type=prefix@priority"},
		{"a signal without a prefix", with(RelaySignalsEnv, "leads-created"), false, "is not prefix:signal"},
		{"a namespace with a space", with(NamespaceEnv, "site ops"), false, "is not a name"},
		{"no task queue", with(TaskQueueEnv, ""), false, "is not a name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePolicy(env(tc.env))
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("ParsePolicy = %v, %v; want an error naming %q", p, err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case tc.on != (p != nil):
				t.Errorf("ParsePolicy = %v, want a policy: %t", p, tc.on)
			}
		})
	}
}

func TestIdentityOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		subject *pkix.Name
		role    Role
		noRole  string
	}{
		{"no certificate", nil, "", "no client certificate"},
		{"no OU", &pkix.Name{CommonName: "siteops"}, "", "names no role"},
		{"an unknown OU", &pkix.Name{CommonName: "x", OrganizationalUnit: []string{"engineering"}}, "", "names no role"},
		{"the worker", &pkix.Name{CommonName: "siteops-worker", OrganizationalUnit: []string{"worker"}}, RoleWorker, ""},
		{"a role among other OUs", &pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"sre", "oncall"}}, RoleOncall, ""},
		{"two roles", &pkix.Name{CommonName: "x", OrganizationalUnit: []string{"ingress", "admin"}}, "", "names 2 roles"},
		{"a partner", &pkix.Name{CommonName: "acme", OrganizationalUnit: []string{"partner"}}, RolePartner, ""},
		{"a partner without a name", &pkix.Name{OrganizationalUnit: []string{"partner"}}, "", "must name the partner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ai *authorization.AuthInfo
			if tc.subject != nil {
				ai = &authorization.AuthInfo{TLSSubject: tc.subject}
			}
			id := IdentityOf(ai)
			if id.Role != tc.role || !strings.Contains(id.NoRole, tc.noRole) || (tc.noRole == "") != (id.NoRole == "") {
				t.Errorf("IdentityOf = %+v, want role %q and %q", id, tc.role, tc.noRole)
			}
		})
	}
}

// relayStart is the relay's SignalWithStart of a lead sync for site, as
// package relay makes it (relay.Relay.signalOrStart).
func relayStart(site string) *workflowservice.SignalWithStartWorkflowExecutionRequest {
	return &workflowservice.SignalWithStartWorkflowExecutionRequest{
		Namespace: "siteops", WorkflowId: "lead-sync/" + site, WorkflowType: &commonpb.WorkflowType{Name: "LeadSync"},
		TaskQueue: &taskqueuepb.TaskQueue{Name: "siteops", Kind: enumspb.TASK_QUEUE_KIND_NORMAL}, SignalName: "leads-created",
		WorkflowIdReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowTaskTimeout:   durationpb.New(10 * time.Second),
		Priority:              &commonpb.Priority{PriorityKey: 5, FairnessKey: site},
	}
}

// authorize runs a call of the identity through the policy's authorizer
// and claim mapper, as the frontend does.
func authorize(t *testing.T, p *Policy, subject *pkix.Name, target *authorization.CallTarget) authorization.Result {
	t.Helper()
	a, m := p.Wrap(nil)
	var ai *authorization.AuthInfo
	if subject != nil {
		ai = &authorization.AuthInfo{TLSSubject: subject}
	}
	claims, err := m.GetClaims(ai)
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Authorize(context.Background(), claims, target)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

var (
	ingress = &pkix.Name{CommonName: "siteops-ingress", OrganizationalUnit: []string{"ingress"}}
	worker  = &pkix.Name{CommonName: "siteops-worker", OrganizationalUnit: []string{"worker"}}
	oncall  = &pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"oncall"}}
	partner = &pkix.Name{CommonName: "acme", OrganizationalUnit: []string{"partner"}}
	admin   = &pkix.Name{CommonName: "temporal-frontend", OrganizationalUnit: []string{"admin"}}
	noRole  = &pkix.Name{CommonName: "siteops"}
)

// TestIngressSignalWithStartField changes one field of the relay's
// SignalWithStart at a time: each change that reaches beyond the relay is
// refused, naming the field's rule.
func TestIngressSignalWithStartField(t *testing.T) {
	p := policy(t)
	if res := authorize(t, p, ingress, &authorization.CallTarget{APIName: signalWithStart, Namespace: "siteops", Request: relayStart("site_1")}); res.Decision != authorization.DecisionAllow {
		t.Fatalf("the relay's own SignalWithStart: %+v", res)
	}
	long := strings.Repeat("s", 80)
	req := relayStart(long)
	req.Priority.FairnessKey = long[:64]
	if res := authorize(t, p, ingress, &authorization.CallTarget{APIName: signalWithStart, Namespace: "siteops", Request: req}); res.Decision != authorization.DecisionAllow {
		t.Fatalf("the relay's SignalWithStart with a key cut to 64 bytes: %+v", res)
	}
	for _, tc := range []struct {
		field  string
		change func(r *workflowservice.SignalWithStartWorkflowExecutionRequest)
		reason string
	}{
		{"ID of an incident", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) {
			r.WorkflowId = "embed-incident/site_1"
		}, "may not send the signal"},
		{"ID under another type's prefix", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) {
			r.WorkflowId, r.SignalName = "lead-events/3", "site-leads"
		}, "only with an ID under"},
		{"bare prefix", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) { r.WorkflowId = "lead-sync/" }, "only with an ID under"},
		{"type", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) {
			r.WorkflowType.Name = "EmbedIncident"
		}, "may not start"},
		{"signal", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) { r.SignalName = "decide" }, "may not send the signal"},
		{"conflict policy TerminateExisting", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) {
			r.WorkflowIdConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING
		}, "conflict policy"},
		{"conflict policy Fail", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) {
			r.WorkflowIdConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL
		}, "conflict policy"},
		{"reuse policy TerminateIfRunning", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) {
			//lint:ignore SA1019 deprecated, still honoured by the server: the policy must refuse it
			r.WorkflowIdReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_TERMINATE_IF_RUNNING //nolint:staticcheck // deprecated, still honoured: refused here
		}, "reuse policy"},
		{"cron", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) { r.CronSchedule = "* * * * *" }, "cron"},
		{"start delay", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) {
			r.WorkflowStartDelay = durationpb.New(time.Hour)
		}, "delay"},
		{"execution timeout", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) {
			r.WorkflowExecutionTimeout = durationpb.New(time.Second)
		}, "timeout"},
		{"run timeout", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) {
			r.WorkflowRunTimeout = durationpb.New(time.Second)
		}, "timeout"},
		{"versioning override", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) {
			r.VersioningOverride = &workflowpb.VersioningOverride{Override: &workflowpb.VersioningOverride_Pinned{Pinned: &workflowpb.VersioningOverride_PinnedOverride{
				Behavior: workflowpb.VersioningOverride_PINNED_OVERRIDE_BEHAVIOR_PINNED, Version: &deploymentpb.WorkerDeploymentVersion{DeploymentName: "siteops", BuildId: "old"}}}}
		}, "versioning"},
		{"priority key 1", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) { r.Priority.PriorityKey = 1 }, "only at priority 5"},
		{"no priority", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) { r.Priority = nil }, "only at priority 5"},
		{"fairness key", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) { r.Priority.FairnessKey = "site_2" }, "fairness key its ID gives"},
		{"fairness weight", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) { r.Priority.FairnessWeight = 100 }, "weight"},
		{"task queue", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) { r.TaskQueue.Name = "elsewhere" }, "task queue"},
		{"sticky task queue", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) {
			r.TaskQueue.Kind = enumspb.TASK_QUEUE_KIND_STICKY
		}, "task queue"},
		{"retry policy", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) {
			r.RetryPolicy = &commonpb.RetryPolicy{MaximumAttempts: 1}
		}, "retry policy"},
		{"memo", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) {
			r.Memo = &commonpb.Memo{Fields: map[string]*commonpb.Payload{"x": {Data: []byte("1")}}}
		}, "memo"},
		{"search attributes", func(r *workflowservice.SignalWithStartWorkflowExecutionRequest) {
			r.SearchAttributes = &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{"SiteopsOperator": {Data: []byte(`"x"`)}}}
		}, "search attributes"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			req := relayStart("site_1")
			tc.change(req)
			res := authorize(t, p, ingress, &authorization.CallTarget{APIName: signalWithStart, Namespace: req.Namespace, Request: req})
			if res.Decision != authorization.DecisionDeny || !strings.Contains(res.Reason, tc.reason) {
				t.Errorf("the ingress's SignalWithStart with another %s: %+v; want refused for %q", tc.field, res, tc.reason)
			}
		})
	}
	t.Run("namespace", func(t *testing.T) {
		req := relayStart("site_1")
		req.Namespace = "other"
		res := authorize(t, p, ingress, &authorization.CallTarget{APIName: signalWithStart, Namespace: "other", Request: req})
		if res.Decision != authorization.DecisionDeny || !strings.Contains(res.Reason, `only in namespace "siteops"`) {
			t.Errorf("the ingress's SignalWithStart in another namespace: %+v", res)
		}
	})
}

// call is one call of a role's table.
type call struct {
	what   string
	target *authorization.CallTarget
	allow  bool
}

func ns(api string, req any) *authorization.CallTarget {
	return &authorization.CallTarget{APIName: api, Namespace: "siteops", Request: req}
}

func checkCalls(t *testing.T, p *Policy, who *pkix.Name, calls []call) {
	t.Helper()
	for _, c := range calls {
		res := authorize(t, p, who, c.target)
		if got := res.Decision == authorization.DecisionAllow; got != c.allow {
			t.Errorf("%s (%v) %s: allowed %t, want %t (%s)", who.CommonName, who.OrganizationalUnit, c.what, got, c.allow, res.Reason)
		}
		if !c.allow && res.Reason == "" {
			t.Errorf("%s %s: refused without a reason", who.CommonName, c.what)
		}
	}
}

var (
	signalTo = func(id, name string) *workflowservice.SignalWorkflowExecutionRequest {
		return &workflowservice.SignalWorkflowExecutionRequest{Namespace: "siteops", WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id}, SignalName: name}
	}
	terminate      = workflowService + "TerminateWorkflowExecution"
	describe       = workflowService + "DescribeWorkflowExecution"
	pollTask       = workflowService + "PollWorkflowTaskQueue"
	updateNS       = workflowService + "UpdateNamespace"
	listNamespaces = workflowService + "ListNamespaces"
	addAttributes  = "/temporal.api.operatorservice.v1.OperatorService/AddSearchAttributes"
	createEndpoint = "/temporal.api.operatorservice.v1.OperatorService/CreateNexusEndpoint"
	systemInfo     = workflowService + "GetSystemInfo"
	dispatchQueue  = nexusService + "DispatchByNamespaceAndTaskQueue"
)

func startOfType(typ, id string, priority int32) *workflowservice.StartWorkflowExecutionRequest {
	return &workflowservice.StartWorkflowExecutionRequest{Namespace: "siteops", WorkflowId: id, WorkflowType: &commonpb.WorkflowType{Name: typ},
		TaskQueue: &taskqueuepb.TaskQueue{Name: "siteops"}, Priority: &commonpb.Priority{PriorityKey: priority}}
}

func TestRoles(t *testing.T) {
	p := policy(t)
	t.Run("ingress", func(t *testing.T) {
		checkCalls(t, p, ingress, []call{
			{"checks its namespace", ns(describeNamespace, nil), true},
			{"gets the system's info", &authorization.CallTarget{APIName: systemInfo}, true},
			{"signals a lead sync", ns(signal, signalTo("lead-sync/site_1", "leads-created")), true},
			{"signals an onboarding's knowledge", ns(signal, signalTo("onboarding/acme", "knowledge-ready")), true},
			{"signals a rotation's verified delivery", ns(signal, signalTo("secret-rotation/ep_1", "verified-delivery")), true},
			{"signals an incident", ns(signal, signalTo("embed-incident/site_1", "verified-delivery")), false},
			{"sends a lead sync a signal the relay does not send", ns(signal, signalTo("lead-sync/site_1", "sync")), false},
			{"signals in another namespace", &authorization.CallTarget{APIName: signal, Namespace: "other", Request: signalTo("lead-sync/x", "leads-created")}, false},
			{"starts a lead sync without a signal", ns(startWorkflow, startOfType("LeadSync", "lead-sync/site_1", 5)), false},
			{"terminates", ns(terminate, nil), false},
			{"reads a workflow", ns(describe, nil), false},
			{"polls for tasks", ns(pollTask, nil), false},
			{"lists namespaces", &authorization.CallTarget{APIName: listNamespaces}, false},
		})
	})
	t.Run("worker", func(t *testing.T) {
		checkCalls(t, p, worker, []call{
			{"polls", ns(pollTask, nil), true},
			{"starts anything in its namespace", ns(startWorkflow, startOfType("Anything", "x", 3)), true},
			{"terminates in its namespace", ns(terminate, nil), true},
			{"sets the current version", ns(setCurrent, nil), true},
			{"updates its namespace", ns(updateNS, nil), false},
			{"adds search attributes", ns(addAttributes, nil), true},
			{"registers its namespace", ns(workflowService+"RegisterNamespace", nil), true},
			{"removes search attributes", ns("/temporal.api.operatorservice.v1.OperatorService/RemoveSearchAttributes", nil), false},
			{"deletes its namespace", ns("/temporal.api.operatorservice.v1.OperatorService/DeleteNamespace", nil), false},
			{"calls in another namespace", &authorization.CallTarget{APIName: describe, Namespace: "acme"}, false},
			{"lists namespaces", &authorization.CallTarget{APIName: listNamespaces}, false},
			{"creates a Nexus endpoint", &authorization.CallTarget{APIName: createEndpoint}, false},
			{"dispatches a Nexus request to its own task queue", ns(dispatchQueue, nil), false},
		})
	})
	t.Run("oncall", func(t *testing.T) {
		upd := func(id string) *workflowservice.UpdateWorkflowExecutionRequest {
			return &workflowservice.UpdateWorkflowExecutionRequest{Namespace: "siteops", WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id}}
		}
		uws := func(start *workflowservice.StartWorkflowExecutionRequest, id string) *workflowservice.ExecuteMultiOperationRequest {
			return &workflowservice.ExecuteMultiOperationRequest{Namespace: "siteops", Operations: []*workflowservice.ExecuteMultiOperationRequest_Operation{
				{Operation: &workflowservice.ExecuteMultiOperationRequest_Operation_StartWorkflow{StartWorkflow: start}},
				{Operation: &workflowservice.ExecuteMultiOperationRequest_Operation_UpdateWorkflow{UpdateWorkflow: upd(id)}},
			}}
		}
		incident := startOfType("EmbedIncident", "embed-incident/site_1", 1)
		terminating := startOfType("EmbedIncident", "embed-incident/site_1", 1)
		terminating.WorkflowIdConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING
		withCallback := startOfType("EmbedIncident", "embed-incident/site_1", 1)
		withCallback.CompletionCallbacks = []*commonpb.Callback{{Variant: &commonpb.Callback_Nexus_{Nexus: &commonpb.Callback_Nexus{Url: "https://elsewhere.example/cb"}}}}
		checkCalls(t, p, oncall, []call{
			{"reads a workflow", ns(describe, nil), true},
			{"lists workflows", ns(workflowService+"ListWorkflowExecutions", nil), true},
			{"queries a workflow", ns(workflowService+"QueryWorkflow", nil), true},
			{"starts an incident", ns(startWorkflow, incident), true},
			{"starts an incident with an update", ns(multiOperation, uws(incident, "embed-incident/site_1")), true},
			{"starts an incident terminating the running one", ns(startWorkflow, terminating), false},
			{"starts an incident with a completion callback", ns(startWorkflow, withCallback), false},
			{"starts an incident under a lead sync's ID", ns(startWorkflow, startOfType("EmbedIncident", "lead-sync/site_1", 1)), false},
			{"starts a lead sync at the playbook's priority", ns(startWorkflow, startOfType("LeadSync", "lead-sync/site_1", 1)), false},
			{"starts a lead sync", ns(startWorkflow, startOfType("LeadSync", "lead-sync/site_1", 5)), true},
			{"starts a type it does not run", ns(startWorkflow, startOfType("LeadEvents", "lead-events/1", 5)), false},
			{"updates an incident", ns(updateWorkflow, upd("embed-incident/site_1")), true},
			{"updates a lead shard", ns(updateWorkflow, upd("lead-events/1")), false},
			{"signals a rotation", ns(signal, signalTo("secret-rotation/ep_1", "decide")), true},
			{"sets the current version (rollback)", ns(setCurrent, nil), true},
			{"terminates", ns(terminate, nil), false},
			{"cancels", ns(workflowService+"RequestCancelWorkflowExecution", nil), false},
			{"resets", ns(workflowService+"ResetWorkflowExecution", nil), false},
			{"deletes a schedule", ns(workflowService+"DeleteSchedule", nil), false},
			{"polls for tasks (runs a worker)", ns(pollTask, nil), false},
			{"reads another namespace", &authorization.CallTarget{APIName: describe, Namespace: "acme"}, false},
			{"updates its namespace", ns(updateNS, nil), false},
		})
	})
	t.Run("partner", func(t *testing.T) {
		nexusTo := func(endpoint string) *workflowservice.RespondWorkflowTaskCompletedRequest {
			return &workflowservice.RespondWorkflowTaskCompletedRequest{Namespace: "acme", Commands: []*commandpb.Command{{
				CommandType: enumspb.COMMAND_TYPE_SCHEDULE_NEXUS_OPERATION,
				Attributes: &commandpb.Command_ScheduleNexusOperationCommandAttributes{ScheduleNexusOperationCommandAttributes: &commandpb.ScheduleNexusOperationCommandAttributes{
					Endpoint: endpoint, Service: "siteops", Operation: "onboard"}},
			}}}
		}
		own := func(api string, req any) *authorization.CallTarget {
			return &authorization.CallTarget{APIName: api, Namespace: "acme", Request: req}
		}
		checkCalls(t, p, partner, []call{
			{"calls siteops through its own endpoint", &authorization.CallTarget{APIName: dispatchEndpoint, Namespace: "siteops", NexusEndpointName: "siteops-acme"}, true},
			{"calls siteops through another partner's endpoint", &authorization.CallTarget{APIName: dispatchEndpoint, Namespace: "siteops", NexusEndpointName: "siteops-globex"}, false},
			{"calls siteops' task queue directly", ns(dispatchQueue, nil), false},
			{"runs its own namespace's worker", own(pollTask, nil), true},
			{"schedules a Nexus operation on its own endpoint", own(completeTask, nexusTo("siteops-acme")), true},
			{"schedules a Nexus operation on an endpoint of its own elsewhere", own(completeTask, nexusTo("billing")), true},
			{"schedules a Nexus operation on another partner's endpoint", own(completeTask, nexusTo("siteops-globex")), false},
			{"reads siteops' namespace", ns(describe, nil), false},
			{"signals in siteops' namespace", ns(signal, signalTo("onboarding/acme", "knowledge-ready")), false},
			{"updates its namespace", own(updateNS, nil), false},
			{"lists namespaces", &authorization.CallTarget{APIName: listNamespaces}, false},
		})
		named := &pkix.Name{CommonName: "siteops", OrganizationalUnit: []string{"partner"}}
		checkCalls(t, p, named, []call{{"named as siteops' namespace, reads it", ns(describe, nil), false}})
	})
	t.Run("admin", func(t *testing.T) {
		checkCalls(t, p, admin, []call{
			{"creates a Nexus endpoint", &authorization.CallTarget{APIName: createEndpoint}, true},
			{"updates a namespace", ns(updateNS, nil), true},
			{"terminates", ns(terminate, nil), true},
		})
	})
	t.Run("no role", func(t *testing.T) {
		checkCalls(t, p, noRole, []call{
			{"gets the system's info", &authorization.CallTarget{APIName: systemInfo}, false},
			{"checks the namespace", ns(describeNamespace, nil), false},
			{"signals", ns(signal, signalTo("lead-sync/site_1", "leads-created")), false},
			{"asks the gRPC health check", &authorization.CallTarget{APIName: grpcHealthCheck}, true},
		})
		res := authorize(t, p, nil, ns(describe, nil))
		if res.Decision != authorization.DecisionDeny || !strings.Contains(res.Reason, "no client certificate") {
			t.Errorf("a caller without a certificate: %+v", res)
		}
	})
}
