package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/inbox"
	"github.com/siteops/siteops/relay"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/wiring"
)

const eventsHelp = `They read and change only the store (SITEOPS_DATABASE_URL, the one the
ingress records into); they need no Temporal connection, and create no
store: where the worker or the ingress has made none, they exit 3 naming
it. A replay changes rows of the inbox: the relay of a running 'siteops
ingress' dispatches the replayed events, within about a second.`

func (c *cli) eventsCmd() *cobra.Command {
	cmd := group("events", "List, inspect and replay the webhook events in the inbox",
		c.eventsListCmd(), c.eventsShowCmd(), c.eventsReplayCmd())
	cmd.Long = `List, inspect and replay the webhook events the ingress recorded, and what
the relay made of each: signalled to a workflow, no-target, target-gone,
ignored, malformed, still pending or failing, or a dead letter (dispatch
failed ` + strconv.Itoa(relay.DefaultMaxAttempts) + ` times in a row; no longer retried).

` + eventsHelp
	return cmd
}

func (c *cli) eventsListCmd() *cobra.Command {
	var (
		ff      eventFilterFlags
		rf      refusedFlags
		pending bool
		limit   int
		page    string
	)
	cmd := &cobra.Command{
		Use:   "list [--type T] [--site ID] [--outcome O | --pending] [--since D] [--limit N] [--page TOKEN] | --refused [--receiver NAME] [--reason R] [--since D] [--limit N]",
		Short: "List inbox events, newest first: type, site, when received, outcome, attempts, last error",
		Long: `List the inbox's events, newest first, a page at a time (--limit, default
` + strconv.Itoa(store.DefaultEventPage) + `): id, type, site, when received, status (the outcome, or
pending / failing while the relay has not handled it; dead for a dead
letter), attempts, replays and the last error. When more match, the last
line gives the --page token of the next page (-o json: next_page).

It also says when the oldest event the inbox keeps was received: the relay
purges handled events after SITEOPS_INBOX_RETENTION (default 30 days) and
keeps pending events and dead letters whatever their age.

` + refusedHelp + `

` + eventsHelp,
		Example: "  siteops events list --outcome no-target --since 1h\n  siteops events list --outcome dead\n  siteops events list --site site_1 --type lead.created -o json\n  siteops events list --refused --since 1h\n  siteops events list --refused --receiver v2 --reason invalid_signature",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rf.given() {
				return c.listRefused(cmd, rf, ff, pending, limit, page)
			}
			f, err := ff.filter(time.Now())
			if err != nil {
				return err
			}
			if pending {
				if ff.outcome != "" {
					return usageError{errors.New("--pending and --outcome both choose a state; give one (--pending is --outcome pending)")}
				}
				f.Status = store.StatusPending
			}
			if limit <= 0 || limit > 1000 {
				return usageError{fmt.Errorf("--limit %d: give 1 to 1000", limit)}
			}
			f.Limit, f.Page = limit, page
			st, err := wiring.OpenExistingStoreFromEnv(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = st.Close() }()
			l, err := inbox.ListEvents(cmd.Context(), st, f)
			if errors.Is(err, store.ErrBadPage) {
				return usageError{fmt.Errorf("--page: %w", err)}
			}
			if err != nil {
				return err
			}
			if l.NextPage != nil && c.output == "jsonl" {
				defer c.warn(cmd.ErrOrStderr(), "more events match; the next page: "+listCommand(ff, pending, limit)+" --page "+*l.NextPage)
			}
			return c.showList(cmd, l, l.Events, func(w io.Writer) error { return writeEventList(w, l, listCommand(ff, pending, limit)) })
		},
	}
	ff.register(cmd)
	rf.register(cmd)
	cmd.Flags().BoolVar(&pending, "pending", false, "only events the relay has not handled yet (pending and failing)")
	cmd.Flags().IntVar(&limit, "limit", store.DefaultEventPage, "events per page (at most 1000)")
	cmd.Flags().StringVar(&page, "page", "", "continue from the token the previous page printed")
	return cmd
}

func writeEventList(w io.Writer, l inbox.EventList, again string) error {
	if len(l.Events) == 0 {
		_, _ = fmt.Fprintln(w, "no events match")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		_, _ = fmt.Fprintln(tw, "EVENT\tTYPE\tSITE\tRECEIVED\tSTATUS\tATTEMPTS\tREPLAYS\tLAST ERROR")
		dead := false
		for _, e := range l.Events {
			dead = dead || e.Outcome == store.OutcomeDead
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", e.EventID, e.Type, dash(e.SiteID),
				e.ReceivedAt.Format(time.RFC3339), e.Status, e.Attempts, e.Replays, dash(inbox.ErrorLine(e.LastError, 72)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if dead {
			_, _ = fmt.Fprintln(w, "dead letters are no longer retried; after fixing the cause: siteops events replay --outcome dead")
		}
	}
	if l.OldestReceivedAt == nil {
		_, _ = fmt.Fprintln(w, "the inbox is empty")
	} else {
		_, _ = fmt.Fprintf(w, "oldest kept event received %s (handled events are purged after SITEOPS_INBOX_RETENTION; pending events and dead letters are kept)\n",
			l.OldestReceivedAt.Format(time.RFC3339))
	}
	if l.NextPage != nil {
		_, _ = fmt.Fprintf(w, "next page: %s --page %s\n", again, *l.NextPage)
	}
	return nil
}

// listCommand is the events list command with the same selection, for
// the next page.
func listCommand(ff eventFilterFlags, pending bool, limit int) string {
	parts := []string{"siteops events list"}
	for _, f := range []struct{ name, value string }{{"type", ff.typ}, {"site", ff.site}, {"outcome", ff.outcome}, {"since", ff.since}} {
		if f.value != "" {
			parts = append(parts, "--"+f.name+" "+shellQuote(f.value))
		}
	}
	if pending {
		parts = append(parts, "--pending")
	}
	if limit != store.DefaultEventPage {
		parts = append(parts, "--limit "+strconv.Itoa(limit))
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a shell when it holds more than the characters
// of ids, types and durations.
func shellQuote(s string) string {
	for _, r := range s {
		plain := r == '.' || r == '_' || r == '-' || r == ':' || r == '+' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !plain {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}

// workflowRun names a workflow, and its run when known.
func workflowRun(wf, run string) string {
	if run != "" {
		return wf + " (run " + run + ")"
	}
	return wf
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// dashTime is t in RFC 3339, or "-" for the zero time.
func dashTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339)
}

func (c *cli) eventsShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show EVENT_ID",
		Short: "Show an event: its envelope as received, how it was verified, every dispatch attempt, the workflow it reached",
		Long: `Show one inbox event: the envelope exactly as received, which receiver took
it and which secret verified it (the stored secret's endpoint and
fingerprint, or SITEOPS_WEBHOOK_SECRETS; never a secret), every dispatch
attempt with its outcome, error and workflow, every replay (who, when), and
the workflow (and run) it reached. Exit 3 when the inbox does not hold it
(never received, or purged after SITEOPS_INBOX_RETENTION).

` + eventsHelp,
		Example: "  siteops events show evt_01JD4R2\n  siteops events show verified:we_2 -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := wiring.OpenExistingStoreFromEnv(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = st.Close() }()
			d, err := st.Event(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return c.show(cmd, inbox.NewEventDetail(d), func(w io.Writer) error { return writeEventDetail(w, d) })
		},
	}
}

func writeEventDetail(w io.Writer, d store.EventDetail) error {
	const stamp = "2006-01-02T15:04:05.000Z07:00"
	p := func(label, format string, args ...any) {
		_, _ = fmt.Fprintf(w, "%-10s%s\n", label, fmt.Sprintf(format, args...))
	}
	p("event", "%s", d.EventID)
	p("type", "%s", inbox.EventType(d.EventRecord))
	if d.SiteID != "" {
		p("site", "%s", d.SiteID)
	}
	if d.SubjectEventID != "" {
		p("about", "the first delivery verified with endpoint %s's stored secret: event %s", d.EndpointID, d.SubjectEventID)
	}
	p("received", "%s on receiver %s", d.ReceivedAt.Format(stamp), store.ReceiverName(d.Receiver))
	switch inbox.VerificationOf(d).Secret {
	case inbox.SecretStored:
		p("verified", "with the stored secret of endpoint %s (receiver %s), fingerprint %s", d.EndpointID, store.ReceiverName(d.SecretReceiver), d.Fingerprint)
	case inbox.SecretEnv:
		p("verified", "with a secret of SITEOPS_WEBHOOK_SECRETS (not stored, so no fingerprint here)")
	default:
		p("verified", "with the secret of endpoint %s, no longer stored here", d.EndpointID)
	}
	if d.TraceContext != "" {
		p("trace", "%s", d.TraceContext)
	}
	status := d.Status()
	switch {
	case d.Outcome != "":
		status += fmt.Sprintf(" at %s after %d attempt(s)", d.DispatchedAt.Format(stamp), d.Attempts)
	case d.Failures > 0:
		status += fmt.Sprintf(": %d attempt(s) failed, next at %s", d.Failures, d.NextAttemptAt.Format(stamp))
	default:
		status += fmt.Sprintf(": due at %s, for the relay of a running siteops ingress", d.NextAttemptAt.Format(stamp))
	}
	p("status", "%s", status)
	if d.Outcome == store.OutcomeDead {
		p("", "a dead letter: no longer retried; siteops events replay %s queues it again", d.EventID)
	}
	if d.LastError != "" {
		p("error", "%s", oneLine(d.LastError))
	}
	if d.Replays > 0 {
		p("replayed", "%d time(s), last by %s at %s", d.Replays, d.ReplayedBy, d.ReplayedAt.Format(stamp))
	}
	if wf, run := d.Target(); wf != "" {
		p("workflow", "%s", workflowRun(wf, run))
	} else {
		p("workflow", "none reached")
	}
	_, _ = fmt.Fprintln(w, "history")
	if len(d.History) == 0 {
		_, _ = fmt.Fprintln(w, "  no attempt yet")
	}
	for _, h := range d.History {
		if h.Kind == store.HistoryReplay {
			_, _ = fmt.Fprintf(w, "  %s  replay %d by %s\n", h.At.Format(stamp), h.Replay, dash(h.Operator))
			continue
		}
		line := fmt.Sprintf("  %s  attempt %d  %s", h.At.Format(stamp), h.Attempt, h.Outcome)
		if h.WorkflowID != "" {
			line += "  " + workflowRun(h.WorkflowID, h.RunID)
		}
		if h.Error != "" {
			line += "  " + oneLine(h.Error)
		}
		_, _ = fmt.Fprintln(w, line)
	}
	_, _ = fmt.Fprintf(w, "body (as received, %d bytes)\n", len(d.Body))
	_, _ = fmt.Fprintf(w, "%s\n", d.Body)
	return nil
}

func (c *cli) eventsReplayCmd() *cobra.Command {
	var (
		ff       eventFilterFlags
		limit    int
		cf       confirmFlags
		wait     bool
		operator string
		wf       waitFlags
	)
	cmd := &cobra.Command{
		Use:   "replay EVENT_ID... | --outcome O [--type T] [--site ID] [--since D] [--dry-run] [--yes]",
		Short: "Queue events for the relay again (by id, or all in a state), recorded as a replay",
		Long: `Queue inbox events for the relay again: by id, or every event in a state
(--outcome, narrowed by --type, --site and --since; at most --limit, newest
first). Each is made due at once, its failures are forgotten (a dead letter
gets all ` + strconv.Itoa(relay.DefaultMaxAttempts) + ` attempts again), and the replay is recorded with who
asked (--operator) and when: 'siteops events show' lists it.

The relay dispatches a replayed event like a new one, to the workflow its
type and site lead to now: useful after no-target (the site's workflow was
recorded late), target-gone (the workflow ended and runs again), a dead
letter, or a failing event. Workflows deduplicate by event id:
` + memories() + `
So replaying an event a workflow already had changes nothing there while
the workflow still remembers it; the command says when an event had reached
a workflow before.

Ids that the inbox does not hold fail the command (exit 3) and replay
nothing. --wait waits until the relay has dispatched them and prints each
outcome.

--dry-run lists the events that would be replayed and changes nothing. A
replay of more than ` + strconv.Itoa(bulkReplay) + ` events, or of dead letters (--outcome dead),
lists them and asks first on a terminal, unless --yes; elsewhere it needs
--yes (exit 2 without it, nothing changed). It replays exactly the events
it listed.

` + eventsHelp,
		Example: "  siteops events replay evt_01JD4R2\n  siteops events replay --outcome no-target --since 1h --wait\n  siteops events replay --outcome dead --dry-run\n  siteops events replay --outcome dead --yes",
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) > 0 && ff.given():
				return usageError{errors.New("give event ids or --outcome with its filters, not both")}
			case len(args) == 0 && ff.outcome == "":
				if ff.given() {
					return usageError{errors.New("choose the state of the events to replay with --outcome (e.g. --outcome no-target --since 1h)")}
				}
				return usageError{errors.New("give the ids of the events to replay, or --outcome (e.g. --outcome no-target --since 1h)")}
			case limit <= 0:
				return usageError{fmt.Errorf("--limit %d: give a positive number", limit)}
			}
			f, err := ff.filter(time.Now())
			if err != nil {
				return err
			}
			st, err := wiring.OpenExistingStoreFromEnv(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = st.Close() }()
			// What would be replayed is read first; the replay takes
			// exactly those events.
			req := inbox.ReplayRequest{IDs: args, Filter: f, Limit: limit, DryRun: true, Operator: operator}
			preview, err := inbox.ReplayEvents(cmd.Context(), st, req)
			if err != nil {
				return err
			}
			if n := len(preview.Replayed); cf.dryRun || n > bulkReplay || n > 0 && ff.outcome == store.OutcomeDead {
				if ok, err := c.confirm(cmd, &cf, replayChange(preview, limit)); err != nil || !ok {
					return err
				}
			}
			res := preview
			if len(preview.Replayed) > 0 && !cf.dryRun {
				req.IDs, req.DryRun = replayedIDs(preview), false
				if res, err = inbox.ReplayEvents(cmd.Context(), st, req); err != nil {
					return err
				}
				res.MoreMatched = preview.MoreMatched
			}
			var waitErr error
			if wait && !cf.dryRun && len(res.Replayed) > 0 {
				c.phases(cmd, fmt.Sprintf("waiting for the relay of a running siteops ingress to dispatch %d replayed event(s)", len(res.Replayed)))
				waitErr = inbox.AwaitReplays(cmd.Context(), st, res.Replayed, 200*time.Millisecond, wf.timeout)
				c.endWait()
			}
			// Only a wait that ended with every event handled says the
			// relay dispatched them; the error says what a cut one means.
			if err := c.show(cmd, res, func(w io.Writer) error { writeReplays(w, res, wait && waitErr == nil, limit); return nil }); err != nil {
				return err
			}
			return waitErr
		},
	}
	ff.register(cmd)
	cmd.Flags().IntVar(&limit, "limit", 1000, "replay at most this many of the events --outcome selects (the newest)")
	cf.register(cmd)
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the relay has dispatched them and print each outcome")
	operatorFlag(cmd, &operator, "who is replaying (recorded with the replay)")
	wf.register(cmd, time.Minute)
	cmd.Flags().Lookup("timeout").Usage = "with --wait: stop waiting after this long (the events stay queued)"
	return cmd
}

func writeReplays(w io.Writer, res inbox.ReplayResult, waited bool, limit int) {
	out, operator := res.Replayed, res.Operator
	if len(out) == 0 {
		_, _ = fmt.Fprintln(w, "no events match; nothing replayed")
		return
	}
	for _, r := range out {
		_, _ = fmt.Fprintln(w, replayLine(r))
		if r.Status != "" { // what the wait saw become of it
			line := "    now " + r.Status
			if r.WorkflowID != "" {
				line += " → " + workflowRun(r.WorkflowID, r.RunID)
			}
			if r.Error != "" {
				line += ": " + oneLine(r.Error)
			}
			_, _ = fmt.Fprintln(w, line)
		}
	}
	switch {
	case waited:
		_, _ = fmt.Fprintf(w, "replayed %d event(s) as %s; the relay dispatched them\n", len(out), operator)
	default:
		_, _ = fmt.Fprintf(w, "replayed %d event(s) as %s: queued for the relay of a running siteops ingress, which dispatches them within about a second; see siteops events show ID\n", len(out), operator)
	}
	if res.MoreMatched {
		_, _ = fmt.Fprintf(w, "more events matched than --limit %d: only the newest %d were taken; raise --limit for the rest\n", limit, limit)
	}
}

// memories lists what each workflow the relay signals remembers of the
// event ids it saw, as the route table says, one "  - " line each.
func memories() string {
	ms := relay.Memories()
	for i, m := range ms {
		ms[i] = "  - " + m
	}
	return strings.Join(ms, "\n")
}
