package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/inbox"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/wiring"
)

// This file is the one place of the flags several commands share, and of
// what they mean.

// temporalFlags are the flags of every command that talks to Temporal;
// they win over TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and TEMPORAL_PROFILE.
type temporalFlags struct{ address, namespace, profile string }

func (f *temporalFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.address, "address", "", "Temporal frontend HOST:PORT (default $TEMPORAL_ADDRESS, the profile's, or localhost:7233)")
	cmd.Flags().StringVar(&f.namespace, "namespace", "", "Temporal namespace (default $TEMPORAL_NAMESPACE, the profile's, or default)")
	cmd.Flags().StringVar(&f.profile, "profile", "", "profile of the temporal CLI's config file to use (default $TEMPORAL_PROFILE or default)")
}

// load reads siteops' Temporal settings and applies the flags.
func (f *temporalFlags) load() (config.Temporal, error) {
	var t config.Temporal
	if err := config.Load(&t); err != nil {
		return t, err
	}
	f.apply(&t)
	t.Identity = cliIdentity()
	return t, nil
}

// apply sets the flags in t.
func (f *temporalFlags) apply(t *config.Temporal) {
	t.Address, t.Namespace, t.Profile = f.address, f.namespace, f.profile
}

// cliIdentity is the identity Temporal records with every request of the
// CLI: who runs it (SITEOPS_OPERATOR or the login name, not a flag) and
// where, so that a workflow's history says who started, signalled or
// decided it whatever its input claims.
func cliIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("siteops-cli %s@%s", defaultOperator(), host)
}

// waitFlags bound a command's wait.
type waitFlags struct{ timeout time.Duration }

func (w *waitFlags) register(cmd *cobra.Command, def time.Duration) {
	help := "stop waiting after this long (0: no limit); the workflow goes on. It also bounds retrying an unavailable Temporal (20s when 0)"
	cmd.Flags().DurationVar(&w.timeout, "timeout", def, help)
}

// explain words a wait that ended early.
func (w *waitFlags) explain(err error) error {
	var stopped *starter.ErrStoppedWaiting
	if errors.As(err, &stopped) && errors.Is(stopped.Cause, context.DeadlineExceeded) {
		return &timedOut{stopped: stopped, after: w.timeout}
	}
	return err
}

// timedOut is a wait that --timeout ended; the workflow goes on.
type timedOut struct {
	stopped *starter.ErrStoppedWaiting
	after   time.Duration
}

func (e *timedOut) Error() string {
	return fmt.Sprintf("stopped waiting after %s (--timeout); %s continues — siteops status %s", e.after, e.stopped.WorkflowID, e.stopped.WorkflowID)
}

func (e *timedOut) Unwrap() error { return e.stopped }

// preflightFlags are the flags of the processes that check before they
// start.
type preflightFlags struct{ skip bool }

func (p *preflightFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&p.skip, "skip-checks", false, "start even if a start-up check fails (each failure is logged as an error)")
}

func (p *preflightFlags) options() wiring.Preflight { return wiring.Preflight{Skip: p.skip} }

// eventFilterFlags select events in list and replay.
type eventFilterFlags struct{ typ, site, outcome, since string }

func (f *eventFilterFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.typ, "type", "", "only events of this type, e.g. knowledge.ready")
	cmd.Flags().StringVar(&f.site, "site", "", "only events about this site (data.site_id)")
	cmd.Flags().StringVar(&f.outcome, "outcome", "", "only events in this state: "+strings.Join(inbox.EventStates(), ", "))
	cmd.Flags().StringVar(&f.since, "since", "", "only events received since: a duration (90m, 1h, 7d) or a time (2026-11-21T09:00:00Z)")
}

func (f *eventFilterFlags) given() bool {
	return f.typ != "" || f.site != "" || f.outcome != "" || f.since != ""
}

func (f *eventFilterFlags) filter(now time.Time) (store.EventFilter, error) {
	ef := store.EventFilter{Type: f.typ, SiteID: f.site, Status: f.outcome}
	if states := inbox.EventStates(); f.outcome != "" && !slices.Contains(states, f.outcome) {
		return ef, usageError{fmt.Errorf("--outcome %q: use one of %s", f.outcome, strings.Join(states, ", "))}
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

// parseWhen reads an RFC 3339 time or a duration from now.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(d), nil
	}
	return time.Time{}, fmt.Errorf("--at %q: give an RFC 3339 time (2026-11-23T18:00:00Z) or a duration from now (30m)", s)
}

// operatorFlag adds --operator: who is acting, recorded with what the
// command does. Its help names one default, where it comes from and what
// it is here; pflag's own "(default ...)" would be a second.
func operatorFlag(cmd *cobra.Command, p *string, usage string) {
	def := defaultOperator()
	cmd.Flags().StringVar(p, "operator", def, fmt.Sprintf("%s (default $SITEOPS_OPERATOR, else the login name: %q)", usage, def))
	cmd.Flags().Lookup("operator").DefValue = ""
}

// defaultOperator is who runs the CLI: SITEOPS_OPERATOR, else the login
// name.
func defaultOperator() string {
	if u := os.Getenv("SITEOPS_OPERATOR"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown"
}
