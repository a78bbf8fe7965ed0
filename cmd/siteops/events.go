package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/webhookingress"
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
failed ` + strconv.Itoa(webhookingress.DefaultMaxAttempts) + ` times in a row; no longer retried).

` + eventsHelp
	return cmd
}

// eventStatuses are the values of --outcome.
var eventStatuses = []string{
	webhookingress.OutcomeSignalled, webhookingress.OutcomeNoTarget, webhookingress.OutcomeTargetGone,
	webhookingress.OutcomeIgnored, webhookingress.OutcomeMalformed, webhookingress.OutcomeDead,
	store.StatusFailing, store.StatusPending,
}

// eventFilterFlags select events in list and replay.
type eventFilterFlags struct{ typ, site, outcome, since string }

func (f *eventFilterFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.typ, "type", "", "only events of this type, e.g. knowledge.ready")
	cmd.Flags().StringVar(&f.site, "site", "", "only events about this site (data.site_id)")
	cmd.Flags().StringVar(&f.outcome, "outcome", "", "only events in this state: "+strings.Join(eventStatuses, ", "))
	cmd.Flags().StringVar(&f.since, "since", "", "only events received since: a duration (90m, 1h, 7d) or a time (2026-11-21T09:00:00Z)")
}

func (f *eventFilterFlags) given() bool {
	return f.typ != "" || f.site != "" || f.outcome != "" || f.since != ""
}

func (f *eventFilterFlags) filter(now time.Time) (store.EventFilter, error) {
	ef := store.EventFilter{Type: f.typ, SiteID: f.site, Status: f.outcome}
	if f.outcome != "" && !slices.Contains(eventStatuses, f.outcome) {
		return ef, usageError{fmt.Errorf("--outcome %q: use one of %s", f.outcome, strings.Join(eventStatuses, ", "))}
	}
	if f.since != "" {
		since, err := parseSince(f.since, now)
		if err != nil {
			return ef, usageError{err}
		}
		ef.Since = since
	}
	return ef, nil
}

// parseSince reads --since: a duration back from now (Go's units, plus d
// for days) or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n > 0 {
			return now.AddDate(0, 0, -n), nil
		}
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--since %q: use a duration back from now (90m, 1h, 7d) or a time (2026-11-21T09:00:00Z)", s)
}

// eventJSON is an inbox event as -o json shows it.
type eventJSON struct {
	EventID        string     `json:"event_id"`
	Type           string     `json:"type"`
	Kind           string     `json:"kind"`
	SiteID         string     `json:"site_id,omitempty"`
	ReceivedAt     time.Time  `json:"received_at"`
	Status         string     `json:"status"`
	Outcome        string     `json:"outcome,omitempty"`
	DispatchedAt   *time.Time `json:"dispatched_at,omitempty"`
	Attempts       int        `json:"attempts"`
	Failures       int        `json:"failures"`
	LastError      string     `json:"last_error,omitempty"`
	NextAttemptAt  *time.Time `json:"next_attempt_at,omitempty"`
	Replays        int        `json:"replays"`
	ReplayedAt     *time.Time `json:"replayed_at,omitempty"`
	ReplayedBy     string     `json:"replayed_by,omitempty"`
	Receiver       string     `json:"receiver"`
	EndpointID     string     `json:"endpoint_id"`
	SubjectEventID string     `json:"subject_event_id,omitempty"`
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func toEventJSON(r store.EventRecord) eventJSON {
	e := eventJSON{
		EventID: r.EventID, Type: eventType(r), Kind: r.Kind, SiteID: r.SiteID, ReceivedAt: r.ReceivedAt,
		Status: r.Status(), Outcome: r.Outcome, DispatchedAt: optTime(r.DispatchedAt), Attempts: r.Attempts, Failures: r.Failures,
		LastError: r.LastError, Replays: r.Replays, ReplayedAt: optTime(r.ReplayedAt), ReplayedBy: r.ReplayedBy,
		Receiver: store.ReceiverName(r.Receiver), EndpointID: r.EndpointID, SubjectEventID: r.SubjectEventID,
	}
	if r.Outcome == "" {
		e.NextAttemptAt = optTime(r.NextAttemptAt)
	}
	return e
}

// eventType names an event's type, or for a record siteops made, its kind.
func eventType(r store.EventRecord) string {
	if r.Kind != "" && r.Kind != store.KindWebhook {
		return r.Kind
	}
	return r.EventType
}

func (c *cli) eventsListCmd() *cobra.Command {
	var (
		ff      eventFilterFlags
		pending bool
		limit   int
		page    string
	)
	cmd := &cobra.Command{
		Use:   "list [--type T] [--site ID] [--outcome O | --pending] [--since D] [--limit N] [--page TOKEN]",
		Short: "List inbox events, newest first: type, site, when received, outcome, attempts, last error",
		Long: `List the inbox's events, newest first, a page at a time (--limit, default
` + strconv.Itoa(store.DefaultEventPage) + `): id, type, site, when received, status (the outcome, or
pending / failing while the relay has not handled it; dead for a dead
letter), attempts, replays and the last error. When more match, the last
line gives the --page token of the next page (-o json: next_page).

It also says when the oldest event the inbox keeps was received: the relay
purges handled events after SITEOPS_INBOX_RETENTION (default 30 days) and
keeps pending events and dead letters whatever their age.

` + eventsHelp,
		Example: "  siteops events list --outcome no-target --since 1h\n  siteops events list --outcome dead\n  siteops events list --site site_1 --type lead.created -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			st, err := openStore(cmd)
			if err != nil {
				return err
			}
			defer func() { _ = st.Close() }()
			res, err := st.ListEvents(cmd.Context(), f)
			if errors.Is(err, store.ErrBadPage) {
				return usageError{fmt.Errorf("--page: %w", err)}
			}
			if err != nil {
				return err
			}
			oldest, err := st.OldestEvent(cmd.Context())
			if err != nil {
				return err
			}
			out := struct {
				Events           []eventJSON `json:"events"`
				NextPage         *string     `json:"next_page"`
				OldestReceivedAt *time.Time  `json:"oldest_received_at"`
			}{Events: []eventJSON{}, OldestReceivedAt: optTime(oldest)}
			for _, r := range res.Events {
				out.Events = append(out.Events, toEventJSON(r))
			}
			if res.Next != "" {
				out.NextPage = &res.Next
			}
			return c.show(cmd, out, func(w io.Writer) error { return writeEventList(w, res, oldest, listCommand(ff, pending, limit)) })
		},
	}
	ff.register(cmd)
	cmd.Flags().BoolVar(&pending, "pending", false, "only events the relay has not handled yet (pending and failing)")
	cmd.Flags().IntVar(&limit, "limit", store.DefaultEventPage, "events per page (at most 1000)")
	cmd.Flags().StringVar(&page, "page", "", "continue from the token the previous page printed")
	return cmd
}

func writeEventList(w io.Writer, res store.EventPage, oldest time.Time, again string) error {
	if len(res.Events) == 0 {
		_, _ = fmt.Fprintln(w, "no events match")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		_, _ = fmt.Fprintln(tw, "EVENT\tTYPE\tSITE\tRECEIVED\tSTATUS\tATTEMPTS\tREPLAYS\tLAST ERROR")
		dead := false
		for _, r := range res.Events {
			dead = dead || r.Outcome == webhookingress.OutcomeDead
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", r.EventID, eventType(r), dash(r.SiteID),
				r.ReceivedAt.Format(time.RFC3339), r.Status(), r.Attempts, r.Replays, dash(shorten(r.LastError, 72)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if dead {
			_, _ = fmt.Fprintln(w, "dead letters are no longer retried; after fixing the cause: siteops events replay --outcome dead")
		}
	}
	if oldest.IsZero() {
		_, _ = fmt.Fprintln(w, "the inbox is empty")
	} else {
		_, _ = fmt.Fprintf(w, "oldest kept event received %s (handled events are purged after SITEOPS_INBOX_RETENTION; pending events and dead letters are kept)\n",
			oldest.Format(time.RFC3339))
	}
	if res.Next != "" {
		_, _ = fmt.Fprintf(w, "next page: %s --page %s\n", again, res.Next)
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

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shorten keeps s on one line and at most n runes.
func shorten(s string, n int) string {
	s = oneLine(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// showJSON is `events show -o json`.
type showJSON struct {
	eventJSON
	Verification verificationJSON `json:"verification"`
	TraceContext string           `json:"trace_context,omitempty"`
	Workflow     *workflowJSON    `json:"workflow"`
	History      []historyJSON    `json:"history"`
	// Body is the envelope byte for byte as received (a JSON string, so
	// that no re-indenting changes it); BodyBase64 holds it instead when it
	// is not UTF-8.
	Body       string `json:"body,omitempty"`
	BodyBase64 []byte `json:"body_base64,omitempty"`
}

type verificationJSON struct {
	Receiver   string `json:"receiver"`
	EndpointID string `json:"endpoint_id"`
	// Secret is where the verifying secret lives: stored (with its
	// fingerprint), env (SITEOPS_WEBHOOK_SECRETS), or not-stored.
	Secret      string `json:"secret"`
	Fingerprint string `json:"fingerprint,omitempty"`
}

type workflowJSON struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id,omitempty"`
}

type historyJSON struct {
	At         time.Time `json:"at"`
	Kind       string    `json:"kind"`
	Attempt    int       `json:"attempt"`
	Replay     int       `json:"replay"`
	Outcome    string    `json:"outcome,omitempty"`
	WorkflowID string    `json:"workflow_id,omitempty"`
	RunID      string    `json:"run_id,omitempty"`
	Error      string    `json:"error,omitempty"`
	Operator   string    `json:"operator,omitempty"`
}

func verification(d store.EventDetail) verificationJSON {
	v := verificationJSON{Receiver: store.ReceiverName(d.Receiver), EndpointID: d.EndpointID, Fingerprint: d.Fingerprint}
	switch {
	case d.Fingerprint != "":
		v.Secret = "stored"
	case d.EndpointID == webhookingress.EnvEndpoint:
		v.Secret = "env"
	default:
		v.Secret = "not-stored"
	}
	return v
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
			st, err := openStore(cmd)
			if err != nil {
				return err
			}
			defer func() { _ = st.Close() }()
			d, err := st.Event(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return c.show(cmd, toShowJSON(d), func(w io.Writer) error { return writeEventDetail(w, d) })
		},
	}
}

func toShowJSON(d store.EventDetail) showJSON {
	out := showJSON{eventJSON: toEventJSON(d.EventRecord), Verification: verification(d), TraceContext: d.TraceContext, History: []historyJSON{}}
	if wf, run := d.Target(); wf != "" {
		out.Workflow = &workflowJSON{WorkflowID: wf, RunID: run}
	}
	for _, h := range d.History {
		out.History = append(out.History, historyJSON(h))
	}
	if utf8.Valid(d.Body) {
		out.Body = string(d.Body)
	} else {
		out.BodyBase64 = d.Body
	}
	return out
}

func writeEventDetail(w io.Writer, d store.EventDetail) error {
	const stamp = "2006-01-02T15:04:05.000Z07:00"
	p := func(label, format string, args ...any) {
		_, _ = fmt.Fprintf(w, "%-10s%s\n", label, fmt.Sprintf(format, args...))
	}
	p("event", "%s", d.EventID)
	p("type", "%s", eventType(d.EventRecord))
	if d.SiteID != "" {
		p("site", "%s", d.SiteID)
	}
	if d.SubjectEventID != "" {
		p("about", "the first delivery verified with endpoint %s's stored secret: event %s", d.EndpointID, d.SubjectEventID)
	}
	p("received", "%s on receiver %s", d.ReceivedAt.Format(stamp), store.ReceiverName(d.Receiver))
	switch v := verification(d); v.Secret {
	case "stored":
		p("verified", "with the stored secret of endpoint %s (receiver %s), fingerprint %s", d.EndpointID, store.ReceiverName(d.SecretReceiver), d.Fingerprint)
	case "env":
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
	if d.Outcome == webhookingress.OutcomeDead {
		p("", "a dead letter: no longer retried; siteops events replay %s queues it again", d.EventID)
	}
	if d.LastError != "" {
		p("error", "%s", oneLine(d.LastError))
	}
	if d.Replays > 0 {
		p("replayed", "%d time(s), last by %s at %s", d.Replays, d.ReplayedBy, d.ReplayedAt.Format(stamp))
	}
	if wf, run := d.Target(); wf != "" {
		if run != "" {
			wf += " (run " + run + ")"
		}
		p("workflow", "%s", wf)
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
			line += "  " + h.WorkflowID
			if h.RunID != "" {
				line += " (run " + h.RunID + ")"
			}
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

// replayJSON is one replayed event as -o json shows it.
type replayJSON struct {
	EventID            string `json:"event_id"`
	Type               string `json:"type"`
	SiteID             string `json:"site_id,omitempty"`
	PreviousStatus     string `json:"previous_status"`
	PreviousWorkflowID string `json:"previous_workflow_id,omitempty"`
	Replay             int    `json:"replay"`
	Note               string `json:"note"`
	// After --wait: what the relay made of it.
	Status     string `json:"status,omitempty"`
	WorkflowID string `json:"workflow_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	Error      string `json:"error,omitempty"`
}

func (c *cli) eventsReplayCmd() *cobra.Command {
	var (
		ff       eventFilterFlags
		limit    int
		dryRun   bool
		wait     bool
		operator string
		wf       waitFlags
	)
	cmd := &cobra.Command{
		Use:   "replay EVENT_ID... | --outcome O [--type T] [--site ID] [--since D]",
		Short: "Queue events for the relay again (by id, or all in a state), recorded as a replay",
		Long: `Queue inbox events for the relay again: by id, or every event in a state
(--outcome, narrowed by --type, --site and --since; at most --limit, newest
first). Each is made due at once, its failures are forgotten (a dead letter
gets all ` + strconv.Itoa(webhookingress.DefaultMaxAttempts) + ` attempts again), and the replay is recorded with who
asked (--operator) and when: 'siteops events show' lists it.

The relay dispatches a replayed event like a new one, to the workflow its
type and site lead to now: useful after no-target (the site's workflow was
recorded late), target-gone (the workflow ended and runs again), a dead
letter, or a failing event. Workflows deduplicate by event id: a lead sync
remembers the last 1,000 lead.created ids it counted, an onboarding every
event id it saw. So replaying an event a workflow already had changes
nothing there while the workflow still remembers it; the command says when
an event had reached a workflow before.

Ids that the inbox does not hold fail the command (exit 3) and replay
nothing. --wait waits until the relay has dispatched them and prints each
outcome.

` + eventsHelp,
		Example: "  siteops events replay evt_01JD4R2\n  siteops events replay --outcome no-target --since 1h --wait\n  siteops events replay --outcome dead --dry-run",
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
			st, err := openStore(cmd)
			if err != nil {
				return err
			}
			defer func() { _ = st.Close() }()
			ctx := cmd.Context()
			ids, more := args, false
			if len(args) == 0 {
				if ids, more, err = st.MatchingEventIDs(ctx, f, limit); err != nil {
					return err
				}
			}
			var replayed []store.Replayed
			if dryRun {
				replayed, err = st.PreviewReplay(ctx, ids)
			} else {
				replayed, err = st.ReplayEvents(ctx, ids, operator)
			}
			if err != nil {
				return err
			}
			out := make([]replayJSON, len(replayed))
			for i, r := range replayed {
				out[i] = replayJSON{EventID: r.EventID, Type: eventType(r.EventRecord), SiteID: r.SiteID, PreviousStatus: r.Status(),
					PreviousWorkflowID: r.WorkflowID, Replay: r.Replay, Note: replayNote(r)}
			}
			var waitErr error
			if wait && !dryRun && len(out) > 0 {
				waitErr = awaitReplays(ctx, cmd, st, &wf, out)
			}
			// Only a wait that ended with every event handled says the
			// relay dispatched them; the error says what a cut one means.
			if err := c.show(cmd, map[string]any{"replayed": out, "dry_run": dryRun, "more_matched": more, "operator": operator}, func(w io.Writer) error {
				writeReplays(w, out, dryRun, wait && waitErr == nil, more, limit, operator)
				return nil
			}); err != nil {
				return err
			}
			return waitErr
		},
	}
	ff.register(cmd)
	cmd.Flags().IntVar(&limit, "limit", 1000, "replay at most this many of the events --outcome selects (the newest)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be replayed and change nothing")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the relay has dispatched them and print each outcome")
	operatorFlag(cmd, &operator, "who is replaying (recorded with the replay)")
	wf.register(cmd, time.Minute)
	cmd.Flags().Lookup("timeout").Usage = "with --wait: stop waiting after this long (the events stay queued)"
	return cmd
}

// replayNote says, before the relay dispatches it again, what a replay of
// r can change.
func replayNote(r store.Replayed) string {
	switch r.Outcome {
	case webhookingress.OutcomeSignalled:
		return "had reached " + r.WorkflowID + ", which deduplicates by event id: " + rememberedBy(r) +
			"; while it still remembers this event the replay changes nothing there"
	case webhookingress.OutcomeNoTarget:
		return "had no workflow to go to; it reaches the one recorded for its site since, if any"
	case webhookingress.OutcomeTargetGone:
		return r.WorkflowID + " had ended; the replay reaches it only if it runs again now"
	case webhookingress.OutcomeDead:
		return fmt.Sprintf("a dead letter after %d failed attempts in a row (%s); it gets %d attempts again",
			r.Failures, shorten(r.LastError, 80), webhookingress.DefaultMaxAttempts)
	case webhookingress.OutcomeMalformed:
		return "its data lacks the ids its route needs; the body is replayed as recorded, so it will be malformed again"
	case webhookingress.OutcomeIgnored:
		return "no workflow waits for " + eventType(r.EventRecord) + " events; it will be ignored again"
	}
	if r.Failures > 0 {
		return fmt.Sprintf("was failing (%d attempts: %s); due again now, its backoff reset", r.Failures, shorten(r.LastError, 80))
	}
	return "was still waiting for the relay; due now"
}

// rememberedBy says how long the workflow an event reached keeps its id.
func rememberedBy(r store.Replayed) string {
	switch {
	case r.Kind == store.KindEndpointVerified:
		return "a rotation acts on its first verified delivery only"
	case webhook.EventType(r.EventType) == webhook.LeadCreated:
		return "a lead sync remembers the last 1,000 lead.created ids it counted (a new run after it ended remembers none, and syncs)"
	}
	return "an onboarding remembers every event id it saw while it runs"
}

func writeReplays(w io.Writer, out []replayJSON, dryRun, waited, more bool, limit int, operator string) {
	if len(out) == 0 {
		_, _ = fmt.Fprintln(w, "no events match; nothing replayed")
		return
	}
	for _, r := range out {
		_, _ = fmt.Fprintf(w, "%s  %s  %s  was %s: %s\n", r.EventID, r.Type, dash(r.SiteID), r.PreviousStatus, r.Note)
		if r.Status != "" { // what the wait saw become of it
			line := "    now " + r.Status
			if r.WorkflowID != "" {
				line += " → " + r.WorkflowID
				if r.RunID != "" {
					line += " (run " + r.RunID + ")"
				}
			}
			if r.Error != "" {
				line += ": " + oneLine(r.Error)
			}
			_, _ = fmt.Fprintln(w, line)
		}
	}
	switch {
	case dryRun:
		_, _ = fmt.Fprintf(w, "dry run: %d event(s) would be replayed; nothing changed\n", len(out))
	case waited:
		_, _ = fmt.Fprintf(w, "replayed %d event(s) as %s; the relay dispatched them\n", len(out), operator)
	default:
		_, _ = fmt.Fprintf(w, "replayed %d event(s) as %s: queued for the relay of a running siteops ingress, which dispatches them within about a second; see siteops events show ID\n", len(out), operator)
	}
	if more {
		_, _ = fmt.Fprintf(w, "more events matched than --limit %d: only the newest %d were taken; raise --limit for the rest\n", limit, limit)
	}
}

// awaitReplays polls the store until the relay has handled every replayed
// event (or made it fail again), and fills in what became of each.
func awaitReplays(ctx context.Context, cmd *cobra.Command, st *store.Store, wf *waitFlags, out []replayJSON) error {
	ctx, cancel := wf.context(ctx)
	defer cancel()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		left := 0
		for i := range out {
			if out[i].Status != "" {
				continue
			}
			d, err := st.Event(ctx, out[i].EventID)
			if err != nil && ctx.Err() == nil {
				return err
			}
			// Handled, or tried after the replay and failed.
			if err == nil && (d.Outcome != "" || d.Failures > 0) {
				out[i].Status, out[i].Error = d.Status(), d.LastError
				out[i].WorkflowID, out[i].RunID = d.Target()
				continue
			}
			left++
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) && cmd.Context().Err() != nil {
				return &replayWaitStopped{left: left, total: len(out), cause: cmd.Context().Err()}
			}
			return fmt.Errorf("%d of %d replayed event(s) not dispatched after %s (--timeout): is siteops ingress running against this store? They stay queued", left, len(out), wf.timeout)
		case <-t.C:
		}
	}
}

// replayWaitStopped is a wait for replayed events that an interrupt ended,
// worded as the other interrupted waits are: what goes on without the
// command, and where to follow it. It matches the interrupt's cause
// (exit 130).
type replayWaitStopped struct {
	left, total int
	cause       error
}

func (e *replayWaitStopped) Error() string {
	return fmt.Sprintf("stopped waiting; %d of %d replayed event(s) stay queued and the relay of a running siteops ingress dispatches them — siteops events list --pending",
		e.left, e.total)
}

func (e *replayWaitStopped) Unwrap() error { return e.cause }
