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

// EnsureSecretReconcileSchedule creates the Temporal Schedule
// (workflows.SecretReconcileScheduleID) that runs SecretReconcile every
// period on taskQueue, or brings an existing one to that period and task
// queue. Every worker calls it at start; it is idempotent, and workers that
// start together settle on the same schedule (one creates it, the others
// find it). Overlapping runs are skipped.
func EnsureSecretReconcileSchedule(ctx context.Context, c client.Client, taskQueue string, every time.Duration, logger *slog.Logger) error {
	if every <= 0 {
		return errors.New("worker: the secret reconciliation period must be positive")
	}
	action := &client.ScheduleWorkflowAction{
		ID:        workflows.SecretReconcileID(),
		Workflow:  workflows.SecretReconcileWorkflowName,
		Args:      []any{workflows.SecretReconcileInput{}},
		TaskQueue: taskQueue,
		// A run that cannot finish before the next one is due is stopped:
		// the next one starts afresh.
		WorkflowRunTimeout: max(every, time.Minute) * 3,
		// Last in the task queue and in the API's rate (bulk).
		Priority: workflows.SecretReconcileKind.Priority(""),
	}
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}}
	sc := c.ScheduleClient()
	_, err := sc.Create(ctx, client.ScheduleOptions{
		ID:      workflows.SecretReconcileScheduleID,
		Spec:    spec,
		Action:  action,
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Note:    "siteops: retire stored webhook secrets whose endpoint is gone (created by the worker)",
	})
	if err == nil {
		logger.Info("secret reconciliation scheduled", "schedule_id", workflows.SecretReconcileScheduleID, "every", every)
		return nil
	}
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return fmt.Errorf("creating the schedule %s: %w", workflows.SecretReconcileScheduleID, err)
	}
	changed := false
	err = sc.GetHandle(ctx, workflows.SecretReconcileScheduleID).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			s := in.Description.Schedule
			cur, _ := s.Action.(*client.ScheduleWorkflowAction)
			if cur != nil && cur.TaskQueue == taskQueue && cur.Workflow == workflows.SecretReconcileWorkflowName && cur.Priority == action.Priority &&
				s.Spec != nil && len(s.Spec.Intervals) == 1 && s.Spec.Intervals[0].Every == every && len(s.Spec.Calendars) == 0 && len(s.Spec.CronExpressions) == 0 {
				return nil, temporal.ErrSkipScheduleUpdate
			}
			changed = true
			s.Action, s.Spec = action, &spec
			return &client.ScheduleUpdate{Schedule: &s}, nil
		},
	})
	if err != nil {
		return fmt.Errorf("updating the schedule %s: %w", workflows.SecretReconcileScheduleID, err)
	}
	if changed {
		logger.Info("secret reconciliation schedule updated", "schedule_id", workflows.SecretReconcileScheduleID, "every", every)
	}
	return nil
}
