package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/inbox"
	"github.com/siteops/siteops/ingress"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/wiring"
)

// refusedFlags select `events list --refused`: the record of the
// deliveries the ingress refused before recording them.
type refusedFlags struct {
	on       bool
	receiver string
	reason   string
}

func (f *refusedFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.on, "refused", false, "list the deliveries the ingress refused (bad or stale signature, unknown receiver, ...) instead of the inbox's events: one row per receiver, reason and minute")
	cmd.Flags().StringVar(&f.receiver, "receiver", "", "with --refused: only deliveries to this receiver (default for POST /webhooks)")
	cmd.Flags().StringVar(&f.reason, "reason", "", "with --refused: only deliveries refused for this reason: "+strings.Join(ingress.RefusalReasons(), ", "))
}

// given reports whether a flag of the refused listing was given.
func (f *refusedFlags) given() bool { return f.on || f.receiver != "" || f.reason != "" }

// refusedHelp is what events list's help says of --refused.
var refusedHelp = `With --refused it lists instead the deliveries the ingress refused before
recording them — a signature no secret stored here verifies, a receiver
that does not exist, a stale timestamp, a malformed header, a body too
large or too slow, no slot, the store failing — newest minute first: one
row per receiver, reason and minute, from every ingress, with the status
answered, the count, the first and last refusal, and the event id and type
of a refused delivery whose signature verified. Receiver names the ingress
does not hold are kept as they came (quoted when out of form), the first
` + strconv.Itoa(ingress.RefusedNamesPerMinute) + ` a minute per ingress, the rest as (other). Never a body, a header, an
address or a secret. Rows are kept SITEOPS_REFUSED_RETENTION (7 days), at
most SITEOPS_REFUSED_MAX_ROWS (10,000). --receiver, --reason, --since and
--limit narrow it.`

// listRefused runs `events list --refused`.
func (c *cli) listRefused(cmd *cobra.Command, rf refusedFlags, ff eventFilterFlags, pending bool, limit int, page string) error {
	if !rf.on {
		return usageError{errors.New("--receiver and --reason select refused deliveries: add --refused")}
	}
	var inboxOnly []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"--type", ff.typ != ""}, {"--site", ff.site != ""}, {"--outcome", ff.outcome != ""}, {"--pending", pending}, {"--page", page != ""}} {
		if f.set {
			inboxOnly = append(inboxOnly, f.name)
		}
	}
	if len(inboxOnly) > 0 {
		return usageError{fmt.Errorf("%s select the inbox's events; a refused delivery was never recorded, so --refused takes --receiver, --reason, --since and --limit", strings.Join(inboxOnly, ", "))}
	}
	if rf.reason != "" && !slices.Contains(ingress.RefusalReasons(), rf.reason) {
		return usageError{fmt.Errorf("--reason %q: use one of %s", rf.reason, strings.Join(ingress.RefusalReasons(), ", "))}
	}
	if limit <= 0 || limit > 1000 {
		return usageError{fmt.Errorf("--limit %d: give 1 to 1000", limit)}
	}
	f := store.RefusedFilter{Receiver: rf.receiver, Reason: rf.reason, Limit: limit}
	if ff.since != "" {
		since, err := parseSince(ff.since, time.Now())
		if err != nil {
			return usageError{err}
		}
		f.Since = since
	}
	st, err := wiring.OpenExistingStoreFromEnv(cmd.Context())
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	l, err := inbox.ListRefused(cmd.Context(), st, f)
	if err != nil {
		return err
	}
	return c.show(cmd, l, func(w io.Writer) error { return writeRefusedList(w, l, limit) })
}

func writeRefusedList(w io.Writer, l inbox.RefusedList, limit int) error {
	if len(l.Refused) == 0 {
		_, _ = fmt.Fprintln(w, "no refused deliveries match")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		_, _ = fmt.Fprintln(tw, "MINUTE\tRECEIVER\tREASON\tSTATUS\tCOUNT\tFIRST\tLAST\tVERIFIED EVENT")
		for _, r := range l.Refused {
			event := "-"
			if r.EventID != "" {
				event = r.EventID + " " + dash(r.EventType)
			}
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", r.Minute.Format("2006-01-02T15:04Z07:00"), r.Receiver, r.Reason, r.Status, r.Count,
				r.FirstAt.Format("15:04:05.000"), r.LastAt.Format("15:04:05.000"), event)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, _ = fmt.Fprintln(w, "refused deliveries are never recorded in the inbox; the sender retries each up to 8 times over about five minutes")
	if l.MoreMatched {
		_, _ = fmt.Fprintf(w, "more rows matched than --limit %s: narrow with --since, --receiver or --reason, or raise --limit\n", strconv.Itoa(limit))
	}
	return nil
}
