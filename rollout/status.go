package rollout

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// Status is where a deployment's routing and its open runs are.
type Status struct {
	Deployment string `json:"deployment"`
	// Current and Ramping are the builds new runs start on ("" none).
	Current        string  `json:"current,omitempty"`
	Ramping        string  `json:"ramping,omitempty"`
	RampPercentage float32 `json:"ramp_percentage,omitempty"`
	// Versions are the builds the deployment lists, oldest first.
	Versions []VersionStatus `json:"versions"`
	// Runs are the open runs grouped by build, behaviour and type.
	Runs []RunGroup `json:"runs"`
	// Truncated says that more runs are open than were counted.
	Truncated bool `json:"truncated,omitempty"`
}

// VersionStatus is one build of the deployment.
type VersionStatus struct {
	BuildID string    `json:"build_id"`
	Created time.Time `json:"created"`
	// Routing is "current", "ramping" or "".
	Routing string `json:"routing,omitempty"`
	// DrainageStatus is the server's: "draining", "drained" or "".
	DrainageStatus string `json:"drainage_status,omitempty"`
	// Pinned counts the open runs pinned to it.
	Pinned int `json:"pinned"`
}

// RunGroup counts the open runs of one type on one build with one
// behaviour.
type RunGroup struct {
	BuildID  string    `json:"build_id,omitempty"`
	Behavior string    `json:"behavior,omitempty"`
	Type     string    `json:"type"`
	Count    int       `json:"count"`
	Oldest   time.Time `json:"oldest_started"`
	Example  string    `json:"example_workflow_id"`
}

// Status describes the deployment's routing, its versions and every open
// run of the namespace by build, behaviour and type.
func (r *Rollout) Status(ctx context.Context) (Status, error) {
	st := Status{Deployment: r.o.Deployment}
	desc, err := r.o.Client.WorkerDeploymentClient().GetHandle(r.o.Deployment).Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
	case err != nil:
		return st, fmt.Errorf("describing deployment %s: %w", r.o.Deployment, err)
	default:
		rc := desc.Info.RoutingConfig
		if rc.CurrentVersion != nil {
			st.Current = rc.CurrentVersion.BuildID
		}
		if rc.RampingVersion != nil {
			st.Ramping, st.RampPercentage = rc.RampingVersion.BuildID, rc.RampingVersionPercentage
		}
		for _, v := range desc.Info.VersionSummaries {
			vs := VersionStatus{BuildID: v.Version.BuildID, Created: v.CreateTime, DrainageStatus: drainage(v.DrainageStatus)}
			switch vs.BuildID {
			case st.Current:
				vs.Routing = "current"
			case st.Ramping:
				vs.Routing = "ramping"
			}
			st.Versions = append(st.Versions, vs)
		}
		sort.Slice(st.Versions, func(i, j int) bool { return st.Versions[i].Created.Before(st.Versions[j].Created) })
	}
	runs, truncated, err := r.list(ctx, "ExecutionStatus = 'Running'")
	if err != nil {
		return st, err
	}
	st.Truncated = truncated
	groups := map[RunGroup]*RunGroup{}
	for _, run := range runs {
		key := RunGroup{BuildID: run.BuildID, Behavior: run.Behavior, Type: run.Type}
		g := groups[key]
		if g == nil {
			g = &RunGroup{BuildID: run.BuildID, Behavior: run.Behavior, Type: run.Type, Oldest: run.Started, Example: run.WorkflowID}
			groups[key] = g
		}
		g.Count++
		if run.Started.Before(g.Oldest) {
			g.Oldest, g.Example = run.Started, run.WorkflowID
		}
		if run.Behavior == behPinned {
			for i := range st.Versions {
				if st.Versions[i].BuildID == run.BuildID {
					st.Versions[i].Pinned++
				}
			}
		}
	}
	for _, g := range groups {
		st.Runs = append(st.Runs, *g)
	}
	sort.Slice(st.Runs, func(i, j int) bool {
		a, b := st.Runs[i], st.Runs[j]
		if a.BuildID != b.BuildID {
			return a.BuildID < b.BuildID
		}
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		return a.Behavior < b.Behavior
	})
	return st, nil
}
