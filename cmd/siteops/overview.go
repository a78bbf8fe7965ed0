package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/overview"
	"github.com/siteops/siteops/wiring"
)

// overviewPatience is how long the overview waits for Temporal before it
// shows what the store and the API say without it: the view is wanted most
// while something is down.
const overviewPatience = 3 * time.Second

func (c *cli) overviewCmd() *cobra.Command {
	var (
		tf       temporalFlags
		limit    int
		lagAfter time.Duration
	)
	cmd := &cobra.Command{
		Use:   "overview [--limit N] [--lag-after D]",
		Short: "What is open or wrong right now, across every site, each with the command to run next",
		Long: `Show everything open or wrong right now, across every site: the embed
incidents open and their state, the secret rotations in flight and their
step, the webhook endpoints that are disabled or whose last delivery
failed, the lead syncs that lag (no page stored for --lag-after) or failed
in the last day, the inbox's dead letters and oldest pending event, and
the deliveries the ingress refused in the last hour (before recording
them: a wrong secret, an unknown receiver, a prober), by receiver and
reason. Each line ends with the command to run next.

It only reads: Temporal (visibility and the workflows' status queries,
which need a worker), the store (SITEOPS_DATABASE_URL) and the API's
endpoint list (AGENTSITE_*). A source that cannot be read is named under
"unavailable", with why, and the rest is shown anyway: it waits at most 3 s
for Temporal. -o json gives the same as one document; the lists behind it
are 'siteops embed list', 'siteops secret list', 'siteops leads list' and
'siteops events list'.`,
		Example: "  siteops overview\n  siteops overview -o json | jq '.incidents[] | .site_id'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit <= 0 || limit > 1000 {
				return usageError{fmt.Errorf("--limit %d: give 1 to 1000", limit)}
			}
			o, closeAll, err := c.overviewSources(cmd, &tf)
			if err != nil {
				return err
			}
			defer closeAll()
			o.Limit, o.LagAfter = limit, lagAfter
			r := overview.Gather(cmd.Context(), o)
			return c.show(cmd, r, func(w io.Writer) error { return writeOverview(w, r) })
		},
	}
	tf.register(cmd)
	cmd.Flags().IntVar(&limit, "limit", overview.DefaultLimit, "most items in each part (1 to 1000)")
	cmd.Flags().DurationVar(&lagAfter, "lag-after", overview.DefaultLagAfter, "a running lead sync lags when it stored no page for this long")
	return cmd
}

// overviewSources opens what the overview reads, each on its own: one that
// cannot be opened is left out with the reason, never an error of the
// command (but for settings that are wrong).
func (c *cli) overviewSources(cmd *cobra.Command, tf *temporalFlags) (overview.Options, func(), error) {
	var o overview.Options
	var closers []func()
	closeAll := func() {
		for _, f := range closers {
			f()
		}
	}
	t, err := tf.load()
	if err != nil {
		return o, closeAll, err
	}
	s, closeStarter, err := wiring.PatientStarter(cmd.Context(), t, false, quietLogger(cmd.ErrOrStderr()), overviewPatience, nil, nil)
	if err != nil {
		o.NoTemporal = err.Error()
	} else {
		closers = append(closers, closeStarter)
		o.Temporal, o.Starter, o.Namespace, o.DataConverter = s.Client(), s, s.Namespace(), s.DataConverter()
	}
	if st, _, err := wiring.InspectStoreFromEnv(cmd.Context()); err != nil {
		o.NoStore = err.Error()
	} else {
		closers = append(closers, func() { _ = st.Close() })
		o.Store = st
	}
	api, err := wiring.APIClientFromEnv()
	if err != nil {
		o.NoEndpoints = err.Error()
	} else {
		o.Endpoints = func(ctx context.Context) ([]agentsite.WebhookEndpoint, error) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			return api.ListWebhookEndpoints(ctx)
		}
	}
	return o, closeAll, nil
}

// writeOverview words a report: one part after another, each with what to
// run next, and a line saying so when all is clear.
func writeOverview(w io.Writer, r overview.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	say := func(format string, args ...any) { _, _ = fmt.Fprintf(tw, format+"\n", args...) }
	say("siteops overview at %s", r.At.Format(time.RFC3339))
	say("")
	if len(r.Incidents) > 0 {
		say("EMBED INCIDENTS OPEN (%d)", len(r.Incidents))
		say("  SITE\tSTATE\tOPEN FOR\tOPERATOR\tNEXT")
		for _, in := range r.Incidents {
			say("  %s\t%s\t%s\t%s\t%s", in.SiteID, in.State, since(r.At, in.OpenedAt), dash(in.Operator), in.Next)
		}
		say("")
	}
	if len(r.Rotations) > 0 {
		say("SECRET ROTATIONS IN FLIGHT (%d)", len(r.Rotations))
		say("  ENDPOINT\tSTEP\tRUNNING FOR\tNEXT")
		for _, ro := range r.Rotations {
			say("  %s\t%s\t%s\t%s", ro.EndpointID, ro.Step, since(r.At, ro.StartedAt), ro.Next)
		}
		say("")
	}
	if len(r.Endpoints) > 0 {
		say("WEBHOOK ENDPOINTS DISABLED OR FAILING (%d)", len(r.Endpoints))
		say("  ENDPOINT\tSTATUS\tLAST DELIVERY\tLAST ERROR\tNEXT")
		for _, e := range r.Endpoints {
			last := "-"
			if !e.LastDeliveryAt.IsZero() {
				last = e.LastOutcome + " " + since(r.At, e.LastDeliveryAt) + " ago"
			}
			say("  %s\t%s\t%s\t%s\t%s", e.EndpointID, dash(e.Status), last, dash(oneLine(e.LastError)), e.Next)
		}
		say("")
	}
	ls := r.LeadSyncs
	if len(ls.Lagging) > 0 || len(ls.Failed) > 0 || len(ls.SweepFailing) > 0 {
		say("LEAD SYNCS LAGGING OR FAILED (of %d running)", ls.Running)
		say("  SITE\tSTATE\tBEHIND\tNEXT")
		for _, l := range ls.Lagging {
			say("  %s\tlagging\t%s\t%s", l.SiteID, l.Behind, l.Next)
		}
		for _, f := range ls.Failed {
			state := "failed " + since(r.At, f.ClosedAt) + " ago"
			if f.Cause != "" {
				state += ": " + cut(oneLine(f.Cause), 60)
			}
			say("  %s\t%s\t-\t%s", f.SiteID, state, f.Next)
		}
		for _, f := range ls.SweepFailing {
			say("  %s\tthe lead sweep cannot read it (%s, %d sweeps since %s ago)\t-\t%s", f.SiteID, f.Reason, f.Failures, since(r.At, f.Since), f.Next)
		}
		if more := ls.SweepFailingTotal - len(ls.SweepFailing); more > 0 {
			say("  … and %d more sites the lead sweep cannot read", more)
		}
		say("")
	}
	if in := r.Inbox; in != nil && (in.Dead > 0 || in.Behind) {
		say("WEBHOOK INBOX")
		if in.Dead > 0 {
			say("  %d dead letters (no longer retried)", in.Dead)
		}
		if in.Behind {
			say("  %d events pending, the oldest received %s ago", in.Pending, since(r.At, in.OldestPending))
		}
		say("  next: %s", in.Next)
		say("")
	}
	if len(r.Refused) > 0 {
		say("DELIVERIES REFUSED IN THE LAST HOUR (before anything was recorded)")
		say("  RECEIVER\tREASON\tSTATUS\tCOUNT\tLAST\tNEXT")
		for _, f := range r.Refused {
			say("  %s\t%s\t%d\t%d\t%s ago\t%s", f.Receiver, f.Reason, f.Status, f.Count, since(r.At, f.LastAt), f.Next)
		}
		say("")
	}
	if len(r.Unavailable) > 0 {
		say("UNAVAILABLE (not read; the rest above is)")
		for _, u := range r.Unavailable {
			say("  %s\t%s", u.Part, cut(u.Reason, 160))
		}
		say("")
	}
	if r.Clear() {
		say("all clear: no incident open, no rotation in flight, no endpoint failing, no lead sync lagging or failed (%d running), no dead letter, the relay keeping up", ls.Running)
	}
	return tw.Flush()
}

// since is how long ago t was at now, in whole seconds.
func since(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return now.Sub(t).Round(time.Second).String()
}

func cut(s string, most int) string {
	if len(s) <= most {
		return s
	}
	return s[:most] + "…"
}
