package workflows

import (
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
)

// Workflow ID prefixes. IDs are derived, never chosen by callers, so that
// the starter and the relay always agree.
const (
	onboardingPrefix = "onboarding/"
	leadSyncPrefix   = "lead-sync/"
	embedPrefix      = "embed-incident/"
)

// OnboardingID is the workflow ID of a site's onboarding: one per slug.
func OnboardingID(slug string) string { return onboardingPrefix + slug }

// LeadSyncID is the workflow ID of a site's lead sync.
func LeadSyncID(siteID string) string { return leadSyncPrefix + siteID }

// EmbedIncidentID is the workflow ID of a site's embed incident; at most one
// is open per site.
func EmbedIncidentID(siteID string) string { return embedPrefix + siteID }

// IDPolicy is how a workflow's derived ID behaves when it is started again.
type IDPolicy struct {
	// Reuse applies when a closed run with the ID exists.
	Reuse enumspb.WorkflowIdReusePolicy
	// Conflict applies when a run with the ID is still open.
	Conflict enumspb.WorkflowIdConflictPolicy
}

// Policies of each workflow, used by every starter.
var (
	// A slug is onboarded once: a second start while it runs or after it
	// succeeded is refused; after a failure it may run again, and its
	// unchanged steps replay under the same idempotency keys.
	OnboardingPolicy = IDPolicy{enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY, enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL}
	// One lead sync per site; starting it again joins the running one.
	LeadSyncPolicy = IDPolicy{enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING}
	// One open incident per site; a second "embed off" joins it (no second
	// PATCH); after it closes, a new incident may start.
	EmbedIncidentPolicy = IDPolicy{enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING}
)

// Key derives the idempotency key of one logical step of a workflow run:
// the workflow ID, a run discriminator where an ID is reused for new
// operations, and the step. The same step of the same run always has the
// same key, so activity retries reuse it.
func Key(parts ...string) string { return strings.Join(parts, "/") }
