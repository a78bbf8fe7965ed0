package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/siteops/siteops/workflows"
)

// DefaultSecretReconcileEvery is how often the secret reconciliation runs
// when Options.SecretReconcileEvery is zero: a deleted endpoint's secret is
// refused at most this long (plus the ingress's secret refresh) after the
// deletion.
const DefaultSecretReconcileEvery = 5 * time.Minute

// DefaultLeadSweepEvery is how often the lead sweep runs when
// Options.LeadSweepEvery is zero: a lead.created delivery that never
// comes is found within about this long (plus the sweep's own run).
const DefaultLeadSweepEvery = time.Hour

// Schedule is one of the Temporal Schedules every worker keeps.
type Schedule struct {
	// ID is the schedule's ID; Kind the workflow it starts, with ID
	// WorkflowID (the server appends the scheduled time) and Input.
	ID         string
	Kind       workflows.Kind
	WorkflowID string
	Input      any
	// Note is the schedule's note; What names it in logs; Step is its
	// step of the worker's start; Unscheduled says, for a log line, what
	// goes wrong while it is not scheduled.
	Note        string
	What        string
	Step        StartStep
	Unscheduled string
}

// The schedules a worker keeps.
var (
	// SecretReconcileSchedule retires stored webhook secrets whose
	// endpoint is gone.
	SecretReconcileSchedule = Schedule{
		ID: workflows.SecretReconcileScheduleID, Kind: workflows.SecretReconcileKind,
		WorkflowID: workflows.SecretReconcileID(), Input: workflows.SecretReconcileInput{},
		Note: "siteops: retire stored webhook secrets whose endpoint is gone (created by the worker)",
		What: "secret reconciliation", Step: StepSchedule,
		Unscheduled: "deleted endpoints' secrets stay accepted until it is",
	}
	// LeadSweepSchedule checks every site with a lead sync for leads a
	// lost lead.created delivery did not bring.
	LeadSweepSchedule = Schedule{
		ID: workflows.LeadSweepScheduleID, Kind: workflows.LeadSweepKind,
		WorkflowID: workflows.LeadSweepID(), Input: workflows.LeadSweepInput{},
		Note: "siteops: find leads whose lead.created delivery never came (created by the worker)",
		What: "lead sweep", Step: StepLeadSweepSchedule,
		Unscheduled: "a lead whose lead.created delivery never comes is found only by lead syncs started with a poll_interval",
	}
)

// EnsureSecretReconcileSchedule creates the secret reconciliation's
// schedule or brings it to every and taskQueue (EnsureSchedule).
func EnsureSecretReconcileSchedule(ctx context.Context, c client.Client, taskQueue string, every time.Duration, logger *slog.Logger) error {
	return EnsureSchedule(ctx, c, SecretReconcileSchedule, taskQueue, every, logger)
}

// EnsureSchedule creates the Temporal Schedule s that starts its workflow
// every period on taskQueue, or brings an existing one to that period and
// task queue. Every worker calls it at start; it is idempotent, and
// workers that start together settle on the same schedule (one creates it,
// the others find it). Overlapping runs are skipped.
func EnsureSchedule(ctx context.Context, c client.Client, s Schedule, taskQueue string, every time.Duration, logger *slog.Logger) error {
	if every <= 0 {
		return fmt.Errorf("worker: the %s period must be positive", s.What)
	}
	action := &client.ScheduleWorkflowAction{
		ID:        s.WorkflowID,
		Workflow:  s.Kind.Name,
		Args:      []any{s.Input},
		TaskQueue: taskQueue,
		// A run that cannot finish before the next one is due is stopped:
		// the next one starts afresh.
		WorkflowRunTimeout: max(every, time.Minute) * 3,
		// Last in the task queue and in the API's rate (bulk).
		Priority: s.Kind.Priority(""),
	}
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}}
	sc := c.ScheduleClient()
	_, err := sc.Create(ctx, client.ScheduleOptions{
		ID:      s.ID,
		Spec:    spec,
		Action:  action,
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Note:    s.Note,
	})
	if err == nil {
		logger.Info(s.What+" scheduled", "schedule_id", s.ID, "every", every)
		return nil
	}
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return fmt.Errorf("creating the schedule %s: %w", s.ID, err)
	}
	changed := false
	err = sc.GetHandle(ctx, s.ID).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			cur := in.Description.Schedule
			act, _ := cur.Action.(*client.ScheduleWorkflowAction)
			if act != nil && act.TaskQueue == taskQueue && act.Workflow == s.Kind.Name && act.Priority == action.Priority &&
				cur.Spec != nil && len(cur.Spec.Intervals) == 1 && cur.Spec.Intervals[0].Every == every && len(cur.Spec.Calendars) == 0 && len(cur.Spec.CronExpressions) == 0 {
				return nil, temporal.ErrSkipScheduleUpdate
			}
			changed = true
			cur.Action, cur.Spec = action, &spec
			return &client.ScheduleUpdate{Schedule: &cur}, nil
		},
	})
	if err != nil {
		return fmt.Errorf("updating the schedule %s: %w", s.ID, err)
	}
	if changed {
		logger.Info(s.What+" schedule updated", "schedule_id", s.ID, "every", every)
	}
	return nil
}
