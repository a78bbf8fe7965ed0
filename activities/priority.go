package activities

import (
	"context"

	"go.temporal.io/sdk/activity"

	"github.com/siteops/siteops/agentsite"
)

// calling returns ctx with the priority the activity's API calls wait as
// in the shared rate limiter (agentsite.Limiter): the activity's own
// class, raised to the playbook class when the workflow runs as a
// playbook, and as key the fairness key Temporal carries for it (a
// partner, a site), else the workflow's ID.
//
// The workflow's class comes from Temporal: the catalogue of package
// workflows starts every run with its kind's class as priority key,
// which its activities inherit, so an endpoint listed by a rotation goes
// first and the same call by the nightly reconciliation goes last. A
// local activity carries no priority of its own (the embed incident's
// PATCH): its class is the one it names.
func calling(ctx context.Context, class agentsite.Class) context.Context {
	if !activity.IsActivity(ctx) {
		return agentsite.WithPriority(ctx, agentsite.Priority{Class: class})
	}
	info := activity.GetInfo(ctx)
	if agentsite.Class(info.Priority.PriorityKey) == agentsite.ClassPlaybook {
		class = agentsite.ClassPlaybook
	}
	key := info.Priority.FairnessKey
	if key == "" {
		key = info.WorkflowExecution.ID
	}
	return agentsite.WithPriority(ctx, agentsite.Priority{Class: class, Key: key})
}
