package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// A command whose mistake costs — bulk, or not to be undone (events
// replay over many events or dead letters, secret proceed and abort,
// secret retire, release finalize) — reads what it would change, and then
// with --dry-run says so and changes nothing; with --yes goes ahead; on a
// terminal asks; and elsewhere refuses, naming --yes (exit 2). This file
// is the one place that decides how. `embed off` is none of them: it is
// the emergency brake, one command with no question.

// confirmFlags are --dry-run and --yes.
type confirmFlags struct{ dryRun, yes bool }

func (f *confirmFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "say exactly what would change, and change nothing")
	cmd.Flags().BoolVar(&f.yes, "yes", false, "go ahead without asking; needed where standard input is not a terminal")
}

// change is what a command would change.
type change struct {
	// Summary says it in a few words, to follow "would" and "will":
	// "retire the secret of endpoint we_1 now".
	Summary string
	// Items are what it applies to or the steps it takes, one line each.
	Items []string
	// More, when set, prints what else a person should see before
	// deciding (the checks that passed, what cannot be checked).
	More func(w io.Writer)
	// JSON is the result of a dry run with -o json; without it, a
	// dryRunResult of Summary and Items.
	JSON any
}

// dryRunResult is a dry run's result with -o json.
type dryRunResult struct {
	DryRun  bool     `json:"dry_run"`
	Changed bool     `json:"changed"`
	Command string   `json:"command"`
	Would   string   `json:"would"`
	Items   []string `json:"items,omitempty"`
}

// errNotConfirmed is an answer other than yes: nothing changed (exit 1).
var errNotConfirmed = errors.New("not confirmed; nothing changed")

// confirm decides whether cmd goes ahead with ch: false with a nil error
// after a dry run (printed as the command's result), true with --yes or
// a yes on a terminal; an answer other than yes is errNotConfirmed, and
// without a terminal to ask on it is a usage error naming --yes.
func (c *cli) confirm(cmd *cobra.Command, f *confirmFlags, ch change) (bool, error) {
	path := cmd.CommandPath()
	switch {
	case f.dryRun:
		v := ch.JSON
		if v == nil {
			v = dryRunResult{DryRun: true, Command: path, Would: ch.Summary, Items: ch.Items}
		}
		return false, c.show(cmd, v, func(w io.Writer) error {
			_, _ = fmt.Fprintf(w, "nothing changed (dry run); %s would %s\n", path, withColon(ch))
			writeChange(w, ch)
			return nil
		})
	case f.yes:
		return true, nil
	case !c.canAsk(cmd):
		return false, usageError{fmt.Errorf("%s asks before it changes anything, and standard input is not a terminal to ask on: add --yes to %s (--dry-run says exactly what would change); nothing changed", path, ch.Summary)}
	}
	w := cmd.ErrOrStderr()
	_, _ = fmt.Fprintf(w, "%s will %s\n", path, withColon(ch))
	writeChange(w, ch)
	_, _ = fmt.Fprint(w, "Go ahead? Type yes to confirm: ")
	answer, err := readAnswer(cmd.Context(), cmd.InOrStdin())
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		_, _ = fmt.Fprintln(w)
		return false, errors.New("no answer before --timeout ended; nothing changed")
	case errors.Is(err, context.Canceled):
		_, _ = fmt.Fprintln(w)
		return false, fmt.Errorf("interrupted; nothing changed (%w)", err)
	case err != nil:
		return false, err
	}
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "yes" && a != "y" {
		return false, errNotConfirmed
	}
	return true, nil
}

// canAsk reports whether a question may be asked: standard input and
// standard error are a terminal.
func (c *cli) canAsk(cmd *cobra.Command) bool {
	if c.interactive != nil {
		return c.interactive(cmd)
	}
	return isTerminal(cmd.InOrStdin()) && isTerminal(cmd.ErrOrStderr())
}

func withColon(ch change) string {
	if len(ch.Items) > 0 || ch.More != nil {
		return ch.Summary + ":"
	}
	return ch.Summary
}

func writeChange(w io.Writer, ch change) {
	for _, it := range ch.Items {
		_, _ = fmt.Fprintf(w, "  %s\n", it)
	}
	if ch.More != nil {
		ch.More(w)
	}
}

// readAnswer reads a line from r, or ends with ctx (Ctrl-C: exit 130).
// End of input is no answer.
func readAnswer(ctx context.Context, r io.Reader) (string, error) {
	type line struct {
		s   string
		err error
	}
	got := make(chan line, 1)
	go func() {
		s, err := bufio.NewReader(r).ReadString('\n')
		got <- line{s, err}
	}()
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case l := <-got:
		if l.err != nil && !errors.Is(l.err, io.EOF) {
			return "", l.err
		}
		return l.s, nil
	}
}
