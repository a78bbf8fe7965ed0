package workflows

import (
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/agentsite"
)

// Kind is one entry of the workflow catalogue: everything the worker, the
// replayer, the starter, the relay and the CLI need to know of a workflow.
// Adding a workflow is adding one entry to Catalogue.
type Kind struct {
	// Name is the workflow type name other SDKs start it by.
	Name string
	// Func is the workflow function.
	Func any
	// Prefix starts every workflow ID of this kind; the rest of the ID is
	// derived from what the workflow is about (a slug, a site, an endpoint).
	Prefix string
	// Policy is how a derived ID behaves when it is started again.
	Policy IDPolicy
	// StatusQuery names the query that answers a *Status of NewStatus's type.
	StatusQuery string
	// NewStatus returns a pointer to the zero status this kind reports.
	NewStatus func() Status
	// Versioning is how a running workflow of this kind moves between
	// worker deployment versions. Pinned stays on the build that started
	// it, so a release waits for it to end before the old build goes: only
	// kinds whose runs end within a bounded time may be Pinned.
	// AutoUpgrade moves to the current build at its next workflow task, so
	// every change to its code must replay its older histories (guarded by
	// workflow.GetVersion; workflows/replay_test.go replays every
	// release's). `siteops release promote` moves runs that an older build
	// pinned onto the current one when this build declares their kind
	// AutoUpgrade.
	Versioning workflow.VersioningBehavior
	// Class is how urgent the kind's work is when the task queue or the
	// API's rate runs short: its runs start with it as Temporal priority
	// key, and its activities' calls to the API wait in it, read by
	// workflow type (ClassOf), whatever priority key a run was started
	// with (agentsite.Class).
	Class agentsite.Class
	// CallerFairness says that a run's fairness key is who asked for it,
	// not what its ID is about: runs started directly take their turns as
	// one caller (Temporal's default, empty key), and a start on someone's
	// behalf (a partner of the Nexus service) sets the key to them.
	CallerFairness bool
}

// Priority is the Temporal priority a run of this kind starts with: the
// kind's class, and key as fairness key, so that within the class the
// task queue shares its dispatch among keys (partners, sites) rather than
// by arrival. Temporal allows fairness keys of at most 64 bytes; a longer
// key is cut.
func (k Kind) Priority(key string) temporal.Priority {
	const most = 64
	if len(key) > most {
		key = key[:most]
	}
	return temporal.Priority{PriorityKey: int(k.Class), FairnessKey: key}
}

// Status is what a workflow reports of itself through its status query.
type Status interface {
	// Summary is the status as a few lines for people.
	Summary() []string
}

// ID is the workflow ID of this kind for key (a slug, a site id, ...).
func (k Kind) ID(key string) string { return k.Prefix + key }

// IDPolicy is how a workflow's derived ID behaves when it is started again.
type IDPolicy struct {
	// Reuse applies when a closed run with the ID exists.
	Reuse enumspb.WorkflowIdReusePolicy
	// Conflict applies when a run with the ID is still open.
	Conflict enumspb.WorkflowIdConflictPolicy
}

// The catalogue's entries. Their IDs are derived, never chosen by callers,
// so that the starter and the relay always agree.
var (
	// A slug is onboarded once: a second start while it runs or after it
	// succeeded is refused; after a failure it may run again, and its
	// unchanged steps replay under the same idempotency keys. It is Pinned:
	// it ends within minutes plus its wait for knowledge, which Validate
	// bounds (MaxKnowledgeTimeout), so the build that started it may keep
	// it to the end and its code may change freely.
	OnboardingKind = Kind{
		Name: OnboardingWorkflowName, Func: Onboarding, Prefix: "onboarding/",
		Policy:      IDPolicy{enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY, enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL},
		StatusQuery: QueryStatus, NewStatus: func() Status { return &OnboardingStatus{} },
		Versioning: workflow.VersioningBehaviorPinned, Class: agentsite.ClassOnboarding,
		// Under a key of its own (its slug), an onboarding's parallel
		// uploads were dispatched one turn at a time among every other
		// onboarding in flight, and their completions came one by one, a
		// workflow task each. In the API's rate onboardings still take
		// turns one at a time (the activities key a call without
		// fairness key by its workflow).
		CallerFairness: true,
	}
	// One lead sync per site; starting it again joins the running one.
	LeadSyncKind = Kind{
		Name: LeadSyncWorkflowName, Func: LeadSync, Prefix: "lead-sync/",
		Policy:      IDPolicy{enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING},
		StatusQuery: QueryProgress, NewStatus: func() Status { return &LeadSyncProgress{} },
		Versioning: workflow.VersioningBehaviorAutoUpgrade, Class: agentsite.ClassBulk,
	}
	// One open incident per site; a second "embed off" joins it (no second
	// PATCH); after it closes, a new incident may start. An incident waits
	// for on-call without limit, so pinning it would keep its build (and
	// the release before it) running for as long as nobody answers: it is
	// AutoUpgrade, and every change to it is guarded by GetVersion.
	EmbedIncidentKind = Kind{
		Name: EmbedIncidentWorkflowName, Func: EmbedIncident, Prefix: "embed-incident/",
		Policy:      IDPolicy{enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING},
		StatusQuery: QueryIncident, NewStatus: func() Status { return &EmbedIncidentStatus{} },
		Versioning: workflow.VersioningBehaviorAutoUpgrade, Class: agentsite.ClassPlaybook,
	}
	// One running rotation per endpoint; a second start while it runs
	// joins it; after it ends the endpoint may be rotated again. A rotation
	// may wait a week for a verified delivery and another for on-call's
	// decision (MaxVerifyTimeout, MaxDecisionTimeout), too long to hold a
	// release back: it is AutoUpgrade, every change guarded by GetVersion.
	SecretRotationKind = Kind{
		Name: SecretRotationWorkflowName, Func: SecretRotation, Prefix: "secret-rotation/",
		Policy:      IDPolicy{enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING},
		StatusQuery: QueryRotation, NewStatus: func() Status { return &SecretRotationStatus{} },
		Versioning: workflow.VersioningBehaviorAutoUpgrade, Class: agentsite.ClassPlaybook,
	}
	// A registration is one logical operation: repeating it while it runs
	// joins it, and after it succeeded the same request is answered with
	// its result instead of creating a second endpoint; after a failure it
	// may run again under the same idempotency key. It is Pinned: it ends
	// within its activities' retries (minutes).
	EndpointRegistrationKind = Kind{
		Name: EndpointRegistrationWorkflowName, Func: EndpointRegistration, Prefix: "webhook-endpoint/",
		Policy:      IDPolicy{enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING},
		StatusQuery: QueryRegistration, NewStatus: func() Status { return &EndpointRegistrationStatus{} },
		Versioning: workflow.VersioningBehaviorPinned, Class: agentsite.ClassOnboarding,
	}
)

// SecretReconcileKind is the secret reconciliation, started by its schedule
// (SecretReconcileScheduleID), never by a caller; a scheduled start
// while one runs is skipped by the schedule's overlap policy.
var SecretReconcileKind = Kind{
	Name: SecretReconcileWorkflowName, Func: SecretReconcile, Prefix: "secret-reconcile/",
	Policy:      IDPolicy{enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL},
	StatusQuery: QueryReconcile, NewStatus: func() Status { return &SecretReconcileStatus{} },
	Versioning: workflow.VersioningBehaviorAutoUpgrade, Class: agentsite.ClassBulk,
}

// LeadSweepKind is the lead syncs' safety net, started by its schedule
// (LeadSweepScheduleID), never by a caller; a scheduled start while one
// runs is skipped by the schedule's overlap policy.
var LeadSweepKind = Kind{
	Name: LeadSweepWorkflowName, Func: LeadSweep, Prefix: "lead-sweep/",
	Policy:      IDPolicy{enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL},
	StatusQuery: QueryLeadSweep, NewStatus: func() Status { return &LeadSweepStatus{} },
	Versioning: workflow.VersioningBehaviorAutoUpgrade, Class: agentsite.ClassBulk,
}

// LeadEventsKind is a lead event shard, started by the relay with the
// first lead.created events of its sites (SITEOPS_LEAD_SHARDS); it runs
// until cancelled, so it is AutoUpgrade, every change guarded by
// GetVersion.
var LeadEventsKind = Kind{
	Name: LeadEventsWorkflowName, Func: LeadEvents, Prefix: "lead-events/",
	Policy:      IDPolicy{enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING},
	StatusQuery: QueryLeadEvents, NewStatus: func() Status { return &LeadEventsStatus{} },
	Versioning: workflow.VersioningBehaviorAutoUpgrade, Class: agentsite.ClassBulk,
}

// Catalogue lists every siteops workflow.
var Catalogue = []Kind{OnboardingKind, LeadSyncKind, EmbedIncidentKind, SecretRotationKind, EndpointRegistrationKind, SecretReconcileKind, LeadSweepKind, LeadEventsKind}

// KindOf finds the kind of a workflow ID by its prefix.
func KindOf(workflowID string) (Kind, bool) {
	for _, k := range Catalogue {
		if strings.HasPrefix(workflowID, k.Prefix) && len(workflowID) > len(k.Prefix) {
			return k, true
		}
	}
	return Kind{}, false
}

// KindNamed finds a kind by its workflow type name.
func KindNamed(name string) (Kind, bool) {
	for _, k := range Catalogue {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// ClassOf is the class of the kind whose workflow type is name, and
// whether the catalogue lists it: what the activities' calls to the API
// wait as (activities.Options.Classes).
func ClassOf(name string) (agentsite.Class, bool) {
	k, ok := KindNamed(name)
	return k.Class, ok
}

// IDForms lists the ID forms of the catalogue, for messages.
func IDForms() string {
	forms := make([]string, len(Catalogue))
	for i, k := range Catalogue {
		forms[i] = k.Prefix + "…"
	}
	return strings.Join(forms, ", ")
}

// OnboardingID is the workflow ID of a site's onboarding: one per slug.
func OnboardingID(slug string) string { return OnboardingKind.ID(slug) }

// LeadSyncID is the workflow ID of a site's lead sync.
func LeadSyncID(siteID string) string { return LeadSyncKind.ID(siteID) }

// EmbedIncidentID is the workflow ID of a site's embed incident; at most one
// is open per site.
func EmbedIncidentID(siteID string) string { return EmbedIncidentKind.ID(siteID) }

// SecretRotationID is the workflow ID of the rotation of an endpoint.
func SecretRotationID(oldEndpointID string) string { return SecretRotationKind.ID(oldEndpointID) }
