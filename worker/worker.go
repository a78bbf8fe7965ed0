// Package worker builds the siteops Temporal worker: one Register function
// that the binary and the tests share, so that what is tested is what runs.
package worker

import (
	"go.temporal.io/sdk/workflow"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/workflows"
)

// Register registers every workflow under its stable name and every
// activity of acts.
func Register(r sdkworker.Registry, acts *activities.Activities) {
	r.RegisterWorkflowWithOptions(workflows.Onboarding, workflow.RegisterOptions{Name: workflows.OnboardingWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.LeadSync, workflow.RegisterOptions{Name: workflows.LeadSyncWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.EmbedIncident, workflow.RegisterOptions{Name: workflows.EmbedIncidentWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.SecretRotation, workflow.RegisterOptions{Name: workflows.SecretRotationWorkflowName})
	r.RegisterActivity(acts)
}
