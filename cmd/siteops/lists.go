package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/overview"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/wiring"
	"github.com/siteops/siteops/workflows"
)

// The list commands of each kind on-call looks after, in the shape of the
// temporal and gh CLIs' lists: filters as flags, --limit, a table, and -o
// json (an array) or -o jsonl (one object per line) for scripts.

// checkLimit refuses a --limit outside 1 to 1000.
func checkLimit(limit int) error {
	if limit <= 0 || limit > 1000 {
		return usageError{fmt.Errorf("--limit %d: give 1 to 1000", limit)}
	}
	return nil
}

func (c *cli) embedListCmd() *cobra.Command {
	var (
		tf    temporalFlags
		site  string
		all   bool
		limit int
	)
	cmd := &cobra.Command{
		Use:   "list [--site ID] [--all] [--limit N]",
		Short: "List the open embed incidents (--all: closed ones too), newest first, with state, age and what to run next",
		Long: `List embed incidents, newest first: the open ones, each with its state (from
its status query, which needs a worker: "unknown" when none answers), how
long it has been open, who opened it and why, and the command to run next;
with --all the closed ones too, with how they ended.`,
		Example: "  siteops embed list\n  siteops embed list --all --site site_1\n  siteops embed list -o jsonl",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkLimit(limit); err != nil {
				return err
			}
			return c.withTemporal(cmd, &tf, false, 0, func(s *starter.Starter) error {
				o := overview.Options{Temporal: s.Client(), Namespace: s.Namespace(), Starter: s, DataConverter: s.DataConverter()}
				l, err := overview.ListIncidents(cmd.Context(), o, overview.IncidentFilter{SiteID: site, All: all, Limit: limit})
				if err != nil {
					return err
				}
				return c.showList(cmd, l, l, func(w io.Writer) error { return writeIncidents(w, l, time.Now(), all) })
			})
		},
	}
	tf.register(cmd)
	cmd.Flags().StringVar(&site, "site", "", "only this site's incidents")
	cmd.Flags().BoolVar(&all, "all", false, "closed incidents too")
	cmd.Flags().IntVar(&limit, "limit", overview.DefaultLimit, "most incidents to list (1 to 1000)")
	return cmd
}

func writeIncidents(w io.Writer, l []overview.Incident, now time.Time, all bool) error {
	if len(l) == 0 {
		if all {
			_, _ = fmt.Fprintln(w, "no embed incident")
		} else {
			_, _ = fmt.Fprintln(w, "no embed incident open")
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "SITE\tSTATE\tOPENED\tAGE\tOPERATOR\tREASON\tNEXT")
	for _, in := range l {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", in.SiteID, in.State, in.OpenedAt.Format(time.RFC3339), since(now, in.OpenedAt),
			dash(in.Operator), dash(cut(oneLine(in.Reason), 40)), dash(in.Next))
	}
	return tw.Flush()
}

func (c *cli) secretListCmd() *cobra.Command {
	var (
		tf              temporalFlags
		receiver, state string
		limit           int
	)
	cmd := &cobra.Command{
		Use:   "list [--receiver NAME] [--state " + strings.Join(overview.SecretStates, "|") + "] [--limit N]",
		Short: "List the stored signing secrets, their state and any rotation in flight (never the secrets)",
		Long: `List the signing secrets the store holds, oldest first: endpoint, receiver,
fingerprint, state (active; retiring, accepted until its time; retired,
refused; unreadable, refused until SITEOPS_SECRET_KEY is the key that stored
it), when it retires, the first delivery it verified, and the rotation in
flight for its endpoint with its step. It reads the store
(SITEOPS_DATABASE_URL, SITEOPS_SECRET_KEY) and, for the rotations, Temporal
when it answers within 3 s. The account's endpoints as the API lists them
are 'siteops webhook list'.`,
		Example: "  siteops secret list\n  siteops secret list --state unreadable\n  siteops secret list --receiver main -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkLimit(limit); err != nil {
				return err
			}
			o, closeAll, err := c.overviewSources(cmd, &tf)
			if err != nil {
				return err
			}
			defer closeAll()
			if o.Store == nil {
				st, err := wiring.OpenExistingStoreFromEnv(cmd.Context())
				if err != nil {
					return err // names why the store cannot be read
				}
				_ = st.Close()
			}
			if o.Temporal == nil {
				c.note(cmd, "rotations not shown: %s", cut(oneLine(o.NoTemporal), 160))
			}
			l, err := overview.ListSecrets(cmd.Context(), o, overview.SecretFilter{Receiver: receiver, State: state, Limit: limit})
			if err != nil {
				if strings.HasPrefix(err.Error(), "state ") {
					return usageError{fmt.Errorf("--%w", err)}
				}
				return err
			}
			return c.showList(cmd, l, l, func(w io.Writer) error { return writeSecrets(w, l) })
		},
	}
	tf.register(cmd)
	cmd.Flags().StringVar(&receiver, "receiver", "", "only this receiver's secrets (default is the receiver of POST /webhooks)")
	cmd.Flags().StringVar(&state, "state", "", "only secrets in this state: "+strings.Join(overview.SecretStates, ", "))
	cmd.Flags().IntVar(&limit, "limit", overview.DefaultLimit, "most secrets to list (1 to 1000)")
	return cmd
}

func writeSecrets(w io.Writer, l []overview.Secret) error {
	if len(l) == 0 {
		_, _ = fmt.Fprintln(w, "no stored secret matches")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "ENDPOINT\tRECEIVER\tFINGERPRINT\tSTATE\tRETIRES\tROTATION\tNEXT")
	for _, s := range l {
		rotation := "-"
		if s.Rotation != "" {
			rotation = s.RotationStep
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.EndpointID, s.Receiver, s.Fingerprint, s.State, dashTime(s.RetiresAt), rotation, dash(s.Next))
	}
	return tw.Flush()
}

func (c *cli) leadsListCmd() *cobra.Command {
	var (
		tf       temporalFlags
		limit    int
		lagAfter time.Duration
	)
	cmd := &cobra.Command{
		Use:   "list [--lag-after D] [--limit N]",
		Short: "List the lead syncs that lag (no page stored for --lag-after) or failed in the last day",
		Long: `List the sites whose lead sync lags, the longest first: running, but it has
stored no page for --lag-after and the lead sweep has not found it current
for as long (a sync stores the page it resumes from every time it runs,
and the sweep, every SITEOPS_LEAD_SWEEP_EVERY, records each site it finds
current, so a healthy one is seen at least that often), with how long; then the lead syncs that failed or timed out in the last day and were
not started again, with the cause. Each with the command to run next. It
reads the store (each sync's last page) and Temporal (which syncs run, and
why one failed).`,
		Example: "  siteops leads list\n  siteops leads list --lag-after 1h -o jsonl",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkLimit(limit); err != nil {
				return err
			}
			return c.withTemporal(cmd, &tf, false, 0, func(s *starter.Starter) error {
				st, err := wiring.OpenExistingStoreFromEnv(cmd.Context())
				if err != nil {
					return err
				}
				defer func() { _ = st.Close() }()
				o := overview.Options{Temporal: s.Client(), Namespace: s.Namespace(), Starter: s, DataConverter: s.DataConverter(), Store: st, Limit: limit, LagAfter: lagAfter}
				ls, missing := overview.LeadSyncStatus(cmd.Context(), o)
				if len(missing) > 0 {
					return fmt.Errorf("reading the %s: %s", missing[0].Part, missing[0].Reason)
				}
				l := leadSyncRows(ls)
				return c.showList(cmd, l, l, func(w io.Writer) error { return writeLeadSyncRows(w, l, ls.Running) })
			})
		},
	}
	tf.register(cmd)
	cmd.Flags().IntVar(&limit, "limit", overview.DefaultLimit, "most lead syncs to list (1 to 1000)")
	cmd.Flags().DurationVar(&lagAfter, "lag-after", overview.DefaultLagAfter, "a running lead sync lags when it stored no page for this long")
	return cmd
}

// leadSyncRow is one line of `siteops leads list`: a lead sync that lags
// or failed.
type leadSyncRow struct {
	SiteID       string    `json:"site_id"`
	WorkflowID   string    `json:"workflow_id"`
	State        string    `json:"state"`
	LastSyncedAt time.Time `json:"last_synced_at,omitzero"`
	Behind       string    `json:"behind,omitempty"`
	ClosedAt     time.Time `json:"closed_at,omitzero"`
	Cause        string    `json:"cause,omitempty"`
	Next         string    `json:"next"`
}

func leadSyncRows(ls overview.LeadSyncs) []leadSyncRow {
	out := []leadSyncRow{}
	for _, l := range ls.Lagging {
		out = append(out, leadSyncRow{SiteID: l.SiteID, WorkflowID: l.WorkflowID, State: "lagging", LastSyncedAt: l.LastSyncedAt, Behind: l.Behind, Next: l.Next})
	}
	for _, f := range ls.Failed {
		out = append(out, leadSyncRow{SiteID: f.SiteID, WorkflowID: f.WorkflowID, State: "failed", ClosedAt: f.ClosedAt, Cause: f.Cause, Next: f.Next})
	}
	for _, f := range ls.SweepFailing {
		out = append(out, leadSyncRow{SiteID: f.SiteID, WorkflowID: workflows.LeadSyncID(f.SiteID), State: "sweep_failing", Cause: "the lead sweep cannot read its leads: " + f.Reason, Next: f.Next})
	}
	return out
}

func writeLeadSyncRows(w io.Writer, l []leadSyncRow, running int) error {
	if len(l) == 0 {
		_, _ = fmt.Fprintf(w, "no lead sync lags or failed (%d running)\n", running)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "SITE\tSTATE\tLAST SYNCED\tBEHIND\tCAUSE\tNEXT")
	for _, r := range l {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.SiteID, r.State, dashTime(r.LastSyncedAt), dash(r.Behind), dash(cut(oneLine(r.Cause), 60)), r.Next)
	}
	_, _ = fmt.Fprintf(tw, "(%d lead syncs running)\n", running)
	return tw.Flush()
}
