package activities

import (
	"context"

	"go.temporal.io/sdk/activity"

	"github.com/siteops/siteops/agentsite"
)

// ClassOf is the class a workflow type has in the catalogue of package
// workflows (workflows.ClassOf), and whether the catalogue lists the type.
type ClassOf func(workflowType string) (agentsite.Class, bool)

// calling returns ctx with the priority the activity's API calls wait as
// in the shared rate limiter (agentsite.Limiter): callPriority of the
// activity's info. Outside an activity the class is the one named.
func (a *Activities) calling(ctx context.Context, class agentsite.Class) context.Context {
	if !activity.IsActivity(ctx) {
		return agentsite.WithPriority(ctx, agentsite.Priority{Class: class})
	}
	return agentsite.WithPriority(ctx, callPriority(a.classOf, activity.GetInfo(ctx), class))
}

// callPriority is the priority of an API call that an activity of info
// names class for: the class callClass gives it by the activity's
// workflow type, and as key the fairness key Temporal carries for it (a
// partner, a site), else the workflow's ID. The run's priority key plays
// no part: whoever starts a run chooses it.
func callPriority(classOf ClassOf, info activity.Info, named agentsite.Class) agentsite.Priority {
	workflowType := ""
	if info.WorkflowType != nil {
		workflowType = info.WorkflowType.Name
	}
	key := info.Priority.FairnessKey
	if key == "" {
		key = info.WorkflowExecution.ID
	}
	return agentsite.Priority{Class: callClass(classOf, workflowType, named), Key: key}
}

// callClass is the class of an API call whose code names class named, made
// for a workflow of workflowType: the playbook class throughout a kind whose
// class is playbook (the embed incident, the secret rotation), so that an
// endpoint listed by a rotation goes first; otherwise the less urgent of
// named and the kind's class, so that no kind's call is more urgent than
// the kind (the same list by the nightly reconciliation goes last). A type
// classOf does not list (or a nil classOf) waits as bulk.
func callClass(classOf ClassOf, workflowType string, named agentsite.Class) agentsite.Class {
	if classOf == nil {
		return agentsite.ClassBulk
	}
	kind, ok := classOf(workflowType)
	switch {
	case !ok || !kind.Valid():
		return agentsite.ClassBulk
	case kind == agentsite.ClassPlaybook:
		return agentsite.ClassPlaybook
	}
	// A larger class is a less urgent one.
	return max(named, kind)
}
