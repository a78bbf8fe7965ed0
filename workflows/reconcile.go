package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/activities"
)

// Names of the secret reconciliation.
const (
	SecretReconcileWorkflowName = "SecretReconcile"
	// SecretReconcileScheduleID is the Temporal Schedule that the worker
	// creates at start and that starts SecretReconcile periodically.
	SecretReconcileScheduleID = "secret-reconcile"
	// QueryReconcile answers SecretReconcileStatus.
	QueryReconcile = "status"
)

// SecretReconcileInput is empty: a reconciliation compares the whole
// store with the whole endpoint list.
type SecretReconcileInput struct{}

// SecretReconcileStatus answers QueryReconcile and is the result.
type SecretReconcileStatus struct {
	Done     bool     `json:"done"`
	Checked  int      `json:"checked"`
	Retired  []string `json:"retired,omitempty"`
	Upgraded int      `json:"upgraded"`
	// Withheld names the endpoints not retired because the endpoint list
	// named none of the stored endpoints (activities.ReconcileSecrets).
	Withheld []string `json:"withheld,omitempty"`
}

// SecretReconcileID is the ID the schedule gives its workflows (the server
// appends the scheduled time).
func SecretReconcileID() string { return SecretReconcileKind.ID("scheduled") }

// SecretReconcile retires the stored secrets of endpoints that no longer
// exist in the account (deleted through the API or a dashboard), so that a
// deleted endpoint's secret stops verifying within one schedule period.
// Secrets from SITEOPS_WEBHOOK_SECRETS are not stored and not touched. An
// endpoint list that names none of the stored endpoints retires nothing
// (the secrets are reported withheld): it cannot be told from an empty or
// another account's answer.
func SecretReconcile(ctx workflow.Context, _ SecretReconcileInput) (SecretReconcileStatus, error) {
	var st SecretReconcileStatus
	if err := workflow.SetQueryHandler(ctx, QueryReconcile, func() (SecretReconcileStatus, error) { return st, nil }); err != nil {
		return st, err
	}
	// A short budget: the next scheduled run tries again.
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 5},
	})
	var a *activities.Activities
	var res activities.ReconcileSecretsResult
	if err := workflow.ExecuteActivity(actx, a.ReconcileSecrets).Get(ctx, &res); err != nil {
		return st, err
	}
	st = SecretReconcileStatus{Done: true, Checked: res.Checked, Retired: res.Retired, Upgraded: res.Upgraded, Withheld: res.Withheld}
	return st, nil
}

// Summary implements Status.
func (s *SecretReconcileStatus) Summary() []string {
	if !s.Done {
		return []string{"reconciling the stored secrets with the endpoint list"}
	}
	lines := []string{fmt.Sprintf("checked %d stored secret(s); retired %d whose endpoint is gone %v; %d moved to the current sealing format", s.Checked, len(s.Retired), s.Retired, s.Upgraded)}
	if len(s.Withheld) > 0 {
		lines = append(lines, fmt.Sprintf("WITHHELD %d retirement(s) %v: the endpoint list named none of the stored endpoints (empty, or another account's?); check AGENTSITE_API_KEY, or run `siteops secret retire` if they are really gone", len(s.Withheld), s.Withheld))
	}
	return lines
}
