package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	commandpb "go.temporal.io/api/command/v1"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/api"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The settings of the role policy, read from the environment of every
// service (only the frontend checks calls). NamespaceEnv turns it on.
const (
	// NamespaceEnv is siteops' namespace: the worker's, the ingress's and
	// on-call's calls must name it.
	NamespaceEnv = "SITEOPS_TEMPORAL_NAMESPACE"
	// TaskQueueEnv is siteops' task queue: the workflows the ingress and
	// on-call start must run on it.
	TaskQueueEnv = "SITEOPS_TEMPORAL_TASK_QUEUE"
	// RelayStartsEnv is what the ingress may start with a signal, as
	// Type=prefix@priority items: the type, the prefix its IDs start with
	// and the priority key its runs start with (the catalogue's).
	RelayStartsEnv = "SITEOPS_TEMPORAL_RELAY_STARTS"
	// RelaySignalsEnv is what the ingress may signal, as prefix:signal
	// items: the signal, to workflows whose IDs start with the prefix.
	RelaySignalsEnv = "SITEOPS_TEMPORAL_RELAY_SIGNALS"
	// OncallStartsEnv is what on-call may start, signal and update, as
	// RelayStartsEnv's items: the playbooks and the CLI's other starts.
	OncallStartsEnv = "SITEOPS_TEMPORAL_ONCALL_STARTS"
)

// retiredEnv are the settings of the signal-only policy this one
// replaced: a server given one refuses to start rather than run without
// the narrowing its operator meant.
var retiredEnv = []string{"SITEOPS_TEMPORAL_SIGNAL_ONLY", "SITEOPS_TEMPORAL_SIGNAL_START_TYPES"}

// PartnerEndpointPrefix starts the name of each partner's Nexus endpoint:
// the partner whose certificate is named acme calls siteops through the
// endpoint siteops-acme, and through no other endpoint of siteops.
const PartnerEndpointPrefix = "siteops-"

// Role is what an identity may do. A certificate names its role in its
// subject's organizational unit (OU); a certificate that names none of
// these, or two of them, has no role and is refused every call.
type Role string

// The roles siteops' deployment issues.
const (
	// RoleAdmin may make every call: the cluster's administrators, and
	// Temporal's own services, which present the frontend's certificate
	// to each other.
	RoleAdmin Role = "admin"
	// RoleWorker may make every call in siteops' namespace but the
	// namespace's administration (it may register the namespace and add
	// search attributes, no more): siteops' worker, its release and setup
	// jobs.
	RoleWorker Role = "worker"
	// RoleIngress may make the relay's calls only: the relay's signals and
	// starts of RelaySignalsEnv and RelayStartsEnv, and the namespace
	// check of its readiness.
	RoleIngress Role = "ingress"
	// RoleOncall may read siteops' namespace, start, signal and update the
	// workflows of OncallStartsEnv, and make the release's calls
	// (set the current version, move runs to it); it may not terminate,
	// cancel, reset or delete anything.
	RoleOncall Role = "oncall"
	// RolePartner may run its own namespace, named by its certificate's
	// common name, and reach siteops only through its own Nexus endpoint
	// (PartnerEndpointPrefix + its name).
	RolePartner Role = "partner"
)

var roles = []Role{RoleAdmin, RoleWorker, RoleIngress, RoleOncall, RolePartner}

// Policy is siteops' authorization of the frontend's callers: default
// deny, and each role its calls.
type Policy struct {
	namespace    string
	taskQueue    string
	relayStarts  map[string]startRule // by type
	relaySignals map[string][]string  // by prefix: the signals
	oncallStarts map[string]startRule // by type
}

// startRule is what a caller may start of one type: its ID prefix and its
// runs' priority key.
type startRule struct {
	prefix   string
	priority int32
}

// name is what a namespace, task queue, type, prefix or signal may be.
var name = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]*$`)

// ParsePolicy reads the policy's settings as getenv gives them. It
// returns nil when NamespaceEnv is empty (the upstream server), and
// refuses a malformed setting, a setting without NamespaceEnv, and the
// retired signal-only settings, naming the fix.
func ParsePolicy(getenv func(string) string) (*Policy, error) {
	for _, k := range retiredEnv {
		if strings.TrimSpace(getenv(k)) != "" {
			return nil, fmt.Errorf("%s is retired: the role policy replaced the signal-only policy. Give each certificate its role in its subject's OU (docs/kubernetes.md, \"Identities and roles\") and set %s, %s, %s, %s and %s instead (deploy/kubernetes/temporal/configmap.yaml has them)",
				k, NamespaceEnv, TaskQueueEnv, RelayStartsEnv, RelaySignalsEnv, OncallStartsEnv)
		}
	}
	ns := strings.TrimSpace(getenv(NamespaceEnv))
	if ns == "" {
		for _, k := range []string{TaskQueueEnv, RelayStartsEnv, RelaySignalsEnv, OncallStartsEnv} {
			if strings.TrimSpace(getenv(k)) != "" {
				return nil, fmt.Errorf("%s is set and %s is not: name siteops' namespace to turn the role policy on", k, NamespaceEnv)
			}
		}
		return nil, nil
	}
	p := &Policy{namespace: ns, taskQueue: strings.TrimSpace(getenv(TaskQueueEnv)), relaySignals: map[string][]string{}}
	for k, v := range map[string]string{NamespaceEnv: p.namespace, TaskQueueEnv: p.taskQueue} {
		if !name.MatchString(v) {
			return nil, fmt.Errorf("%s=%q is not a name (letters, digits, and . _ : / - after the first)", k, v)
		}
	}
	var err error
	if p.relayStarts, err = starts(getenv, RelayStartsEnv); err != nil {
		return nil, err
	}
	if p.oncallStarts, err = starts(getenv, OncallStartsEnv); err != nil {
		return nil, err
	}
	for _, item := range items(getenv(RelaySignalsEnv)) {
		prefix, signal, ok := strings.Cut(item, ":")
		if !ok || !name.MatchString(prefix) || !name.MatchString(signal) {
			return nil, fmt.Errorf("%s: %q is not prefix:signal (e.g. lead-sync/:leads-created)", RelaySignalsEnv, item)
		}
		p.relaySignals[prefix] = append(p.relaySignals[prefix], signal)
	}
	return p, nil
}

// items splits a comma-separated setting, dropping blanks around items.
func items(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// starts reads one Type=prefix@priority list.
func starts(getenv func(string) string, key string) (map[string]startRule, error) {
	out := map[string]startRule{}
	for _, item := range items(getenv(key)) {
		typ, rest, ok1 := strings.Cut(item, "=")
		prefix, prio, ok2 := strings.Cut(rest, "@")
		n, err := strconv.ParseInt(prio, 10, 32)
		if !ok1 || !ok2 || err != nil || n < 1 || !name.MatchString(typ) || !name.MatchString(prefix) {
			return nil, fmt.Errorf("%s: %q is not Type=prefix@priority (e.g. LeadSync=lead-sync/@5)", key, item)
		}
		out[typ] = startRule{prefix: prefix, priority: int32(n)}
	}
	return out, nil
}

// String says what the policy allows, for the server's log.
func (p *Policy) String() string {
	return fmt.Sprintf("default deny; roles by certificate OU (%s); namespace %s, task queue %s; the ingress may start %s and signal %s; on-call may start %s",
		strings.Join(roleNames(), ", "), p.namespace, p.taskQueue, startList(p.relayStarts), signalList(p.relaySignals), startList(p.oncallStarts))
}

func roleNames() []string {
	out := make([]string, len(roles))
	for i, r := range roles {
		out[i] = string(r)
	}
	return out
}

func startList(m map[string]startRule) string {
	if len(m) == 0 {
		return "nothing"
	}
	var out []string
	for typ, s := range m {
		out = append(out, fmt.Sprintf("%s (%s…, priority %d)", typ, s.prefix, s.priority))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

func signalList(m map[string][]string) string {
	if len(m) == 0 {
		return "nothing"
	}
	var out []string
	for prefix, signals := range m {
		for _, s := range signals {
			out = append(out, s+" to "+prefix+"…")
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// Wrap returns the authorizer and the claim mapper of a server that keeps
// the policy. logger (may be nil) receives the refusals.
func (p *Policy) Wrap(logger log.Logger) (authorization.Authorizer, authorization.ClaimMapper) {
	return &authorizer{policy: p, log: logger}, claimMapper{}
}

// Identity is who a caller is: the role and the name its certificate
// gives, or why it has no role.
type Identity struct {
	Role Role
	Name string
	// NoRole says why the certificate has no role; empty when it has one.
	NoRole string
}

// claimMapper reads a caller's role from its client certificate.
type claimMapper struct{}

// GetClaims gives every caller claims naming its identity; a caller
// without a certificate, or whose certificate names no role, gets an
// identity without a role, which the authorizer refuses.
func (claimMapper) GetClaims(ai *authorization.AuthInfo) (*authorization.Claims, error) {
	id := IdentityOf(ai)
	return &authorization.Claims{Subject: id.Name, Extensions: id}, nil
}

// AuthInfoRequired is false: a caller without a certificate is mapped
// too (to no role), so that its refusal is logged as any other.
func (claimMapper) AuthInfoRequired() bool { return false }

// IdentityOf reads the role and name of the certificate in ai.
func IdentityOf(ai *authorization.AuthInfo) Identity {
	if ai == nil || ai.TLSSubject == nil {
		return Identity{NoRole: "no client certificate"}
	}
	subject := ai.TLSSubject
	id := Identity{Name: subject.CommonName}
	var found []Role
	for _, ou := range subject.OrganizationalUnit {
		if r := Role(strings.TrimSpace(ou)); slices.Contains(roles, r) && !slices.Contains(found, r) {
			found = append(found, r)
		}
	}
	switch {
	case len(found) == 0:
		id.NoRole = fmt.Sprintf("its certificate names no role (OU %q; want one of %s)", subject.OrganizationalUnit, strings.Join(roleNames(), ", "))
	case len(found) > 1:
		id.NoRole = fmt.Sprintf("its certificate names %d roles (OU %q): one certificate, one role", len(found), subject.OrganizationalUnit)
	case found[0] == RolePartner && !name.MatchString(id.Name):
		id.NoRole = fmt.Sprintf("a partner's certificate must name the partner in its common name (%q is not a name)", id.Name)
	default:
		id.Role = found[0]
	}
	return id
}

// authorizer decides every call by the caller's role.
type authorizer struct {
	policy *Policy
	log    log.Logger
}

// Authorize allows a call the caller's role names and refuses every
// other, logging the refusal with the caller's name and role.
func (a *authorizer) Authorize(_ context.Context, claims *authorization.Claims, target *authorization.CallTarget) (authorization.Result, error) {
	id := Identity{NoRole: "no claims"}
	if claims != nil {
		if i, ok := claims.Extensions.(Identity); ok {
			id = i
		}
	}
	reason := a.policy.Refusal(id, target)
	if reason == "" {
		return authorization.Result{Decision: authorization.DecisionAllow}, nil
	}
	if a.log != nil {
		a.log.Warn("Refused a call by siteops' role policy.", tag.NewStringTag("caller", id.Name), tag.NewStringTag("role", string(id.Role)),
			tag.NewStringTag("api", target.APIName), tag.WorkflowNamespace(target.Namespace), tag.NewStringTag("reason", reason))
	}
	return authorization.Result{Decision: authorization.DecisionDeny, Reason: reason}, nil
}

const (
	workflowService = "/temporal.api.workflowservice.v1.WorkflowService/"
	nexusService    = "/temporal.api.nexusservice.v1.NexusService/"
	grpcHealthCheck = "/grpc.health.v1.Health/Check"
)

// Refusal says why the identity may not make the call; empty when it may.
func (p *Policy) Refusal(id Identity, target *authorization.CallTarget) string {
	if target.APIName == grpcHealthCheck {
		return "" // names nothing; load balancers ask it
	}
	if id.Role == "" {
		return "no role: " + id.NoRole
	}
	if authorization.IsHealthCheckAPI(target.APIName) {
		return "" // GetSystemInfo, which every SDK client makes first
	}
	switch id.Role {
	case RoleAdmin:
		return ""
	case RoleWorker:
		return p.worker(target)
	case RoleIngress:
		return p.ingress(target)
	case RoleOncall:
		return p.oncall(target)
	case RolePartner:
		return p.partner(id.Name, target)
	}
	return "unknown role " + string(id.Role)
}

// inNamespace refuses a call outside the namespace ns, and a call that is
// not of one namespace.
func inNamespace(role Role, ns string, target *authorization.CallTarget) string {
	if api.GetMethodMetadata(target.APIName).Scope != api.ScopeNamespace {
		return fmt.Sprintf("the %s role makes no cluster-wide calls", role)
	}
	if target.Namespace != ns {
		return fmt.Sprintf("the %s role may call only in namespace %q, not %q", role, ns, target.Namespace)
	}
	return ""
}

func (p *Policy) worker(target *authorization.CallTarget) string {
	if r := inNamespace(RoleWorker, p.namespace, target); r != "" {
		return r
	}
	if strings.HasPrefix(target.APIName, nexusService) {
		return "the worker role dispatches no Nexus requests: its workers poll for them"
	}
	if api.GetMethodMetadata(target.APIName).Access == api.AccessAdmin && !workerSetup[target.APIName] {
		return "the worker role does not administer the namespace: it may register it and add search attributes (deploy/temporal-setup.sh), no more"
	}
	return ""
}

// workerSetup are the namespace's administrative calls the worker's
// identity makes: deploy/temporal-setup.sh registers siteops' namespace
// and adds its search attributes, on a self-hosted cluster and on
// Temporal Cloud alike, with the worker's certificate.
var workerSetup = map[string]bool{
	workflowService + "RegisterNamespace":                                  true,
	"/temporal.api.operatorservice.v1.OperatorService/AddSearchAttributes": true,
}

// The calls the relay makes besides its starts.
var (
	describeNamespace = workflowService + "DescribeNamespace"
	signal            = workflowService + "SignalWorkflowExecution"
	signalWithStart   = workflowService + "SignalWithStartWorkflowExecution"
	startWorkflow     = workflowService + "StartWorkflowExecution"
	multiOperation    = workflowService + "ExecuteMultiOperation"
	updateWorkflow    = workflowService + "UpdateWorkflowExecution"
	setCurrent        = workflowService + "SetWorkerDeploymentCurrentVersion"
	setRamping        = workflowService + "SetWorkerDeploymentRampingVersion"
	updateOptions     = workflowService + "UpdateWorkflowExecutionOptions"
	dispatchEndpoint  = nexusService + "DispatchByEndpoint"
	completeTask      = workflowService + "RespondWorkflowTaskCompleted"
)

func (p *Policy) ingress(target *authorization.CallTarget) string {
	if r := inNamespace(RoleIngress, p.namespace, target); r != "" {
		return r
	}
	switch target.APIName {
	case describeNamespace:
		return ""
	case signal:
		req, ok := target.Request.(*workflowservice.SignalWorkflowExecutionRequest)
		if !ok {
			return "the ingress role's signal carries no request"
		}
		return p.relaySignal(req.GetWorkflowExecution().GetWorkflowId(), req.GetSignalName())
	case signalWithStart:
		req, ok := target.Request.(*workflowservice.SignalWithStartWorkflowExecutionRequest)
		if !ok {
			return "the ingress role's signal-with-start carries no request"
		}
		if r := p.relaySignal(req.GetWorkflowId(), req.GetSignalName()); r != "" {
			return r
		}
		return p.startShape(RoleIngress, p.relayStarts, startOf(req), true)
	}
	return "the ingress role may only signal, and start with a signal what the relay starts"
}

// relaySignal refuses a signal the relay does not send.
func (p *Policy) relaySignal(id, signal string) string {
	for prefix, signals := range p.relaySignals {
		if strings.HasPrefix(id, prefix) && slices.Contains(signals, signal) {
			return ""
		}
	}
	return fmt.Sprintf("the ingress role may not send the signal %q to %q: the relay sends %s", signal, id, signalList(p.relaySignals))
}

// startRequest is what a start request sets, whichever call carries it.
type startRequest struct {
	id, typ, taskQueue string
	taskQueueKind      enumspb.TaskQueueKind
	reuse              enumspb.WorkflowIdReusePolicy
	conflict           enumspb.WorkflowIdConflictPolicy
	cron               string
	delayed            bool
	timeouts           bool // an execution or run timeout
	versioned          bool // a versioning override
	priorityKey        int32
	fairnessKey        string
	fairnessWeight     float32
	extras             bool // a retry policy, memo or search attributes
	callbacks          bool // completion callbacks, or options for a conflict
}

// startCall is what SignalWithStartWorkflowExecutionRequest and
// StartWorkflowExecutionRequest both carry of the start.
type startCall interface {
	GetWorkflowId() string
	GetWorkflowType() *commonpb.WorkflowType
	GetTaskQueue() *taskqueuepb.TaskQueue
	GetWorkflowIdReusePolicy() enumspb.WorkflowIdReusePolicy
	GetWorkflowIdConflictPolicy() enumspb.WorkflowIdConflictPolicy
	GetCronSchedule() string
	GetWorkflowStartDelay() *durationpb.Duration
	GetWorkflowExecutionTimeout() *durationpb.Duration
	GetWorkflowRunTimeout() *durationpb.Duration
	GetVersioningOverride() *workflowpb.VersioningOverride
	GetPriority() *commonpb.Priority
	GetRetryPolicy() *commonpb.RetryPolicy
	GetMemo() *commonpb.Memo
	GetSearchAttributes() *commonpb.SearchAttributes
}

func startOf(r startCall) startRequest {
	s := startRequest{
		id: r.GetWorkflowId(), typ: r.GetWorkflowType().GetName(), taskQueue: r.GetTaskQueue().GetName(), taskQueueKind: r.GetTaskQueue().GetKind(),
		reuse: r.GetWorkflowIdReusePolicy(), conflict: r.GetWorkflowIdConflictPolicy(), cron: r.GetCronSchedule(),
		delayed:     r.GetWorkflowStartDelay().AsDuration() != 0,
		timeouts:    r.GetWorkflowExecutionTimeout().AsDuration() != 0 || r.GetWorkflowRunTimeout().AsDuration() != 0,
		versioned:   r.GetVersioningOverride() != nil,
		priorityKey: r.GetPriority().GetPriorityKey(), fairnessKey: r.GetPriority().GetFairnessKey(), fairnessWeight: r.GetPriority().GetFairnessWeight(),
		extras: r.GetRetryPolicy() != nil || len(r.GetMemo().GetFields()) > 0 || len(r.GetSearchAttributes().GetIndexedFields()) > 0,
	}
	if req, ok := r.(*workflowservice.StartWorkflowExecutionRequest); ok {
		s.callbacks = len(req.GetCompletionCallbacks()) > 0 || req.GetOnConflictOptions() != nil
	}
	return s
}

// fairnessLimit is the most bytes of a fairness key Temporal keeps; the
// catalogue cuts a longer key to it (workflows.Kind.Priority).
const fairnessLimit = 64

// startShape refuses a start that is not of the shape starts allow:
// a listed type under its prefix, in siteops' task queue, that joins a
// running workflow (or, unless keyed, fails) rather than ending it, runs
// now, once, without an override of its build, at the type's priority
// and, when keyed (the relay's starts), with the fairness key its ID
// gives (the catalogue's).
func (p *Policy) startShape(role Role, starts map[string]startRule, s startRequest, keyed bool) string {
	want, ok := starts[s.typ]
	switch {
	case !ok:
		return fmt.Sprintf("the %s role may not start %q: it starts %s", role, s.typ, startList(starts))
	case !strings.HasPrefix(s.id, want.prefix) || len(s.id) == len(want.prefix):
		return fmt.Sprintf("the %s role may start %s only with an ID under %q, not %q", role, s.typ, want.prefix, s.id)
	case s.taskQueue != p.taskQueue || s.taskQueueKind == enumspb.TASK_QUEUE_KIND_STICKY:
		return fmt.Sprintf("the %s role may start workflows only on the task queue %q, not %q", role, p.taskQueue, s.taskQueue)
	case s.conflict != enumspb.WORKFLOW_ID_CONFLICT_POLICY_UNSPECIFIED && s.conflict != enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING &&
		(keyed || s.conflict != enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL):
		return fmt.Sprintf("the %s role may not start with the ID conflict policy %s: its starts join a running workflow, never end it", role, s.conflict)
	//lint:ignore SA1019 deprecated, still honoured by the server: the policy must refuse it
	case s.reuse == enumspb.WORKFLOW_ID_REUSE_POLICY_TERMINATE_IF_RUNNING: //nolint:staticcheck // deprecated, still honoured: refused here
		return fmt.Sprintf("the %s role may not start with the ID reuse policy %s: a start never ends a running workflow", role, s.reuse)
	case s.cron != "":
		return fmt.Sprintf("the %s role may not start a cron schedule (%q)", role, s.cron)
	case s.delayed:
		return fmt.Sprintf("the %s role may not delay a start", role)
	case s.timeouts:
		return fmt.Sprintf("the %s role may not set a workflow's execution or run timeout", role)
	case s.versioned:
		return fmt.Sprintf("the %s role may not override a workflow's versioning", role)
	case s.priorityKey != want.priority:
		return fmt.Sprintf("the %s role may start %s only at priority %d, not %d", role, s.typ, want.priority, s.priorityKey)
	case s.fairnessWeight != 0:
		return fmt.Sprintf("the %s role may not weight a fairness key", role)
	case s.callbacks:
		return fmt.Sprintf("the %s role may not attach completion callbacks or conflict options to a start", role)
	case keyed && s.extras:
		return fmt.Sprintf("the %s role may not set a retry policy, memo or search attributes: the relay's starts set none", role)
	}
	if keyed {
		key := strings.TrimPrefix(s.id, want.prefix)
		if len(key) > fairnessLimit {
			key = key[:fairnessLimit]
		}
		if s.fairnessKey != key {
			return fmt.Sprintf("the %s role may start %s only with the fairness key its ID gives (%q), not %q", role, s.typ, key, s.fairnessKey)
		}
	}
	return ""
}

func (p *Policy) oncall(target *authorization.CallTarget) string {
	if r := inNamespace(RoleOncall, p.namespace, target); r != "" {
		return r
	}
	md := api.GetMethodMetadata(target.APIName)
	if md.Access == api.AccessReadOnly && !strings.HasPrefix(target.APIName, nexusService) {
		return ""
	}
	switch target.APIName {
	case startWorkflow:
		req, _ := target.Request.(*workflowservice.StartWorkflowExecutionRequest)
		return p.startShape(RoleOncall, p.oncallStarts, startOf(req), false)
	case signalWithStart:
		req, _ := target.Request.(*workflowservice.SignalWithStartWorkflowExecutionRequest)
		return p.startShape(RoleOncall, p.oncallStarts, startOf(req), false)
	case multiOperation:
		req, _ := target.Request.(*workflowservice.ExecuteMultiOperationRequest)
		if len(req.GetOperations()) == 0 {
			return "the on-call role's multi-operation carries no operations"
		}
		for _, op := range req.GetOperations() {
			if s := op.GetStartWorkflow(); s != nil {
				if r := p.startShape(RoleOncall, p.oncallStarts, startOf(s), false); r != "" {
					return r
				}
			} else if u := op.GetUpdateWorkflow(); u != nil {
				if r := p.oncallTarget(u.GetWorkflowExecution().GetWorkflowId()); r != "" {
					return r
				}
			} else {
				return "the on-call role's multi-operation holds an operation it may not make"
			}
		}
		return ""
	case signal:
		req, _ := target.Request.(*workflowservice.SignalWorkflowExecutionRequest)
		return p.oncallTarget(req.GetWorkflowExecution().GetWorkflowId())
	case updateWorkflow:
		req, _ := target.Request.(*workflowservice.UpdateWorkflowExecutionRequest)
		return p.oncallTarget(req.GetWorkflowExecution().GetWorkflowId())
	case updateOptions:
		req, _ := target.Request.(*workflowservice.UpdateWorkflowExecutionOptionsRequest)
		return p.oncallTarget(req.GetWorkflowExecution().GetWorkflowId())
	case setCurrent, setRamping:
		return "" // the release's rollback and promotion
	}
	return "the on-call role may read, run the playbooks and move a release, and may not make this call"
}

// oncallTarget refuses a workflow on-call may not signal or update: one
// of a kind it does not start.
func (p *Policy) oncallTarget(id string) string {
	for _, s := range p.oncallStarts {
		if strings.HasPrefix(id, s.prefix) && len(id) > len(s.prefix) {
			return ""
		}
	}
	return fmt.Sprintf("the on-call role may signal and update only the workflows it starts (%s), not %q", startList(p.oncallStarts), id)
}

func (p *Policy) partner(partner string, target *authorization.CallTarget) string {
	own := PartnerEndpointPrefix + partner
	if target.APIName == dispatchEndpoint {
		if target.NexusEndpointName != own {
			return fmt.Sprintf("partner %q may call siteops only through its own Nexus endpoint %q, not %q", partner, own, target.NexusEndpointName)
		}
		return ""
	}
	if partner == p.namespace {
		return fmt.Sprintf("a partner may not be named %q, siteops' own namespace", partner)
	}
	if r := inNamespace(RolePartner, partner, target); r != "" {
		return r
	}
	if strings.HasPrefix(target.APIName, nexusService) {
		return "a partner reaches siteops through its Nexus endpoint, not its task queue"
	}
	if api.GetMethodMetadata(target.APIName).Access == api.AccessAdmin {
		return "the partner role does not administer its namespace"
	}
	if target.APIName == completeTask {
		req, _ := target.Request.(*workflowservice.RespondWorkflowTaskCompletedRequest)
		for _, c := range req.GetCommands() {
			if c.GetCommandType() != enumspb.COMMAND_TYPE_SCHEDULE_NEXUS_OPERATION {
				continue
			}
			if e := nexusEndpoint(c); strings.HasPrefix(e, PartnerEndpointPrefix) && e != own {
				return fmt.Sprintf("partner %q's workflows may reach siteops only through its own Nexus endpoint %q, not %q", partner, own, e)
			}
		}
	}
	return ""
}

func nexusEndpoint(c *commandpb.Command) string {
	return c.GetScheduleNexusOperationCommandAttributes().GetEndpoint()
}
