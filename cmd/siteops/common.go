package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/wiring"
)

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
	t.Address, t.Namespace, t.Profile = f.address, f.namespace, f.profile
	t.Identity = cliIdentity()
	return t, nil
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

// context bounds ctx by the timeout.
func (w *waitFlags) context(ctx context.Context) (context.Context, context.CancelFunc) {
	if w.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, w.timeout)
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

// quietLogger keeps the SDK's own info lines out of a command's output.
func quietLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// processLogger is the log of a long-running process: SITEOPS_LOG_FORMAT
// and SITEOPS_LOG_LEVEL, with -o json choosing JSON when the format is not
// set.
func (c *cli) processLogger(w io.Writer) (*slog.Logger, error) {
	var l config.Log
	if err := config.Load(&l); err != nil {
		return nil, err
	}
	if _, set := os.LookupEnv("SITEOPS_LOG_FORMAT"); !set && c.json() {
		l.Format = "json"
	}
	return l.Logger(w)
}

// withStarter dials Temporal (and opens the store when withStore), runs f,
// and closes them again: the frame of every command that drives workflows.
func (c *cli) withStarter(cmd *cobra.Command, tf *temporalFlags, withStore bool, f func(s *starter.Starter) error) error {
	t, err := tf.load()
	if err != nil {
		return err
	}
	var db *config.Database
	if withStore {
		db = &config.Database{}
		if err := config.Load(db); err != nil {
			return err
		}
	}
	var site config.AgentSite
	if err := config.Load(&site); err != nil {
		return err
	}
	receivers, err := activities.ParseReceiverPolicy(site.PublicURL, site.AllowLoopback)
	if err != nil {
		return config.Invalid("%v", err)
	}
	stderr := cmd.ErrOrStderr()
	s, closeAll, err := wiring.Starter(cmd.Context(), t, db, quietLogger(stderr))
	if err != nil {
		return err
	}
	defer closeAll()
	s.Warn = func(msg string) { c.warn(stderr, msg) }
	s.Receivers = &receivers
	return f(s)
}

// warn tells the person something that does not stop the command.
func (c *cli) warn(w io.Writer, msg string) {
	if c.json() {
		_ = json.NewEncoder(w).Encode(map[string]string{"warning": msg})
		return
	}
	_, _ = fmt.Fprintln(w, "siteops: warning:", msg)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func defaultOperator() string {
	if u := os.Getenv("SITEOPS_OPERATOR"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown"
}

// isTerminal reports whether w is a terminal, where progress may redraw a
// line in place; pipes and log files get plain lines.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress draws a changing status line: redrawn in place on a terminal,
// and on anything else a plain line when the text changes, at most every
// interval.
type progress struct {
	w        io.Writer
	tty      bool
	every    time.Duration
	last     string
	lastAt   time.Time
	drawn    bool
	disabled bool
}

func newProgress(w io.Writer, disabled bool) *progress {
	return &progress{w: w, tty: isTerminal(w), every: 2 * time.Second, disabled: disabled}
}

func (p *progress) show(line string) {
	if p.disabled || line == p.last {
		return
	}
	if p.tty {
		_, _ = fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.last, p.drawn = line, true
		return
	}
	if time.Since(p.lastAt) < p.every && p.last != "" {
		return
	}
	_, _ = fmt.Fprintln(p.w, line)
	p.last, p.lastAt = line, time.Now()
}

// done ends a line drawn in place.
func (p *progress) done() {
	if p.tty && p.drawn {
		_, _ = fmt.Fprintln(p.w)
		p.drawn = false
	}
}
