// Package worker builds the siteops Temporal worker: one Register function
// that the binary, the replayer and the tests share, so that what is tested
// is what runs, and Run, which runs a worker on dependencies built by
// package wiring.
package worker

import (
	"go.temporal.io/sdk/workflow"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/workflows"
)

// Register registers every workflow of the catalogue under its stable name
// and, when acts is not nil, every activity of acts.
func Register(r sdkworker.Registry, acts *activities.Activities) {
	RegisterWorkflows(r)
	if acts != nil {
		r.RegisterActivity(acts)
	}
}

// WorkflowRegistry is where workflows are registered: a worker or a
// replayer.
type WorkflowRegistry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// RegisterWorkflows registers every workflow of the catalogue.
func RegisterWorkflows(r WorkflowRegistry) {
	for _, k := range workflows.Catalogue {
		r.RegisterWorkflowWithOptions(k.Func, workflow.RegisterOptions{Name: k.Name, VersioningBehavior: k.Versioning})
	}
}
