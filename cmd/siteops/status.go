package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

func (c *cli) statusCmd() *cobra.Command {
	var (
		tf    temporalFlags
		limit time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status WORKFLOW_ID",
		Short: "Show a workflow's state, what it reports of itself, and why it failed or what it waits on",
		Long: `Show any siteops workflow (` + workflows.IDForms() + `): its state,
what it reports through its status query, the root cause of a failure (the
message, its type and the API's request id), and for a running workflow the
activity it waits on, its attempt and its last failure.

The status query needs a worker (a closed run is answered by replaying its
history). When none answers within 5s, status says so and names the task
queue, and still shows what Temporal keeps: the state, the pending
activities, and a closed run's failure or result. While Temporal itself is
unavailable it retries until --timeout, then exits 5.`,
		Example: "  siteops status onboarding/acme-anvils\n  siteops status lead-sync/site_1 -o json\n  siteops status secret-rotation/we_1",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.withTemporal(cmd, &tf, false, limit, func(s *starter.Starter) error {
				st, err := s.Status(cmd.Context(), args[0])
				if err != nil {
					return shardHint(err, args[0], os.Getenv("SITEOPS_LEAD_SHARDS"))
				}
				return c.show(cmd, st, func(w io.Writer) error { writeStatus(w, st); return nil })
			})
		},
	}
	tf.register(cmd)
	cmd.Flags().DurationVar(&limit, "timeout", temporalPatience, "give up after this long while Temporal is unavailable")
	return cmd
}

// writeStatus words a workflow's status.
func writeStatus(w io.Writer, st starter.Status) {
	_, _ = fmt.Fprintf(w, "%s  %s  %s  started %s", st.WorkflowID, st.Type, st.Status, st.StartedAt.Format(time.RFC3339))
	if !st.ClosedAt.IsZero() {
		_, _ = fmt.Fprintf(w, "  closed %s", st.ClosedAt.Format(time.RFC3339))
	}
	_, _ = fmt.Fprintln(w)
	if st.Detail != nil {
		lines := st.Detail.Summary()
		if why, ok := starter.IncidentNotOff(st); ok && len(lines) > 0 {
			// Its last state is turning-off, which it no longer does.
			lines[0] = strings.Replace(lines[0], "state "+workflows.IncidentTurningOff, "state "+why+";", 1)
		}
		for _, line := range lines {
			_, _ = fmt.Fprintln(w, line)
		}
	}
	if st.DetailMissing != "" {
		_, _ = fmt.Fprintf(w, "no status from the workflow: %s\n", st.DetailMissing)
	}
	if st.Detail == nil {
		for _, line := range st.ResultSummary() {
			_, _ = fmt.Fprintln(w, line)
		}
	}
	if st.Failure != nil {
		_, _ = fmt.Fprintf(w, "cause: %s\n", st.Failure)
	}
	for _, p := range st.Pending {
		_, _ = fmt.Fprintf(w, "waiting on activity %s (%s, attempt %d)", p.Activity, p.State, p.Attempt)
		if !p.NextAttemptAt.IsZero() {
			_, _ = fmt.Fprintf(w, ", next attempt %s", p.NextAttemptAt.Format(time.RFC3339))
		}
		_, _ = fmt.Fprintln(w)
		if p.LastFailure != nil {
			_, _ = fmt.Fprintf(w, "  last failure: %s\n", p.LastFailure)
		}
	}
}

// shardHint adds to a lead sync that is not found where the site's events
// go when the ingress runs with lead event shards: to the site's shard,
// which this command's SITEOPS_LEAD_SHARDS, when set, names.
func shardHint(err error, id, shards string) error {
	site, ok := strings.CutPrefix(id, workflows.LeadSyncKind.Prefix)
	if !ok || !errors.Is(err, starter.ErrNotFound) {
		return err
	}
	shard := workflows.LeadEventsKind.Prefix + "<k>"
	if n, perr := strconv.Atoi(shards); perr == nil && n > 0 && n <= workflows.MaxLeadShards {
		shard = workflows.LeadEventsKind.ID(workflows.LeadShardKey(site, n))
	}
	return notFoundError{fmt.Sprintf("%v; with lead event shards (SITEOPS_LEAD_SHARDS on the ingress) a site's lead.created events go to its shard instead: siteops status %s", err, shard)}
}
