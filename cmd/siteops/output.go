package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/starter"
)

// This file is the CLI's one printer: whatever a command says goes
// through it, so that -o json is decided here and nowhere else. A
// command's result goes to standard output, as indented JSON with -o json
// or as the text its command words; warnings, notes and errors go to
// standard error.

// show prints a command's result: v as JSON with -o json, else what text
// writes. text's error is the command's: a text result may end in one
// that the JSON result states as a field instead.
func (c *cli) show(cmd *cobra.Command, v any, text func(w io.Writer) error) error {
	if c.json() {
		return writeJSON(cmd.OutOrStdout(), v)
	}
	return text(cmd.OutOrStdout())
}

// say is show for a result whose text is one line.
func (c *cli) say(cmd *cobra.Command, v any, format string, args ...any) error {
	return c.show(cmd, v, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, format+"\n", args...)
		return err
	})
}

// announce prints the line a long-running process starts with: v as one
// line of JSON with -o json (a script reads the first line), else the
// text. It cannot fail the process.
func (c *cli) announce(cmd *cobra.Command, v any, format string, args ...any) {
	if c.json() {
		_ = json.NewEncoder(cmd.OutOrStdout()).Encode(v)
		return
	}
	_, _ = fmt.Fprintf(cmd.OutOrStdout(), format+"\n", args...)
}

// note tells a person reading text something on standard error that the
// JSON result already holds.
func (c *cli) note(cmd *cobra.Command, format string, args ...any) {
	if !c.json() {
		_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "siteops: "+format+"\n", args...)
	}
}

// warn tells the person something that does not stop the command.
func (c *cli) warn(w io.Writer, msg string) {
	if c.json() {
		_ = json.NewEncoder(w).Encode(map[string]string{"warning": msg})
		return
	}
	_, _ = fmt.Fprintln(w, "siteops: warning:", msg)
}

// progress draws a changing status line on w; with -o json it draws none.
func (c *cli) progress(w io.Writer) *progress { return newProgress(w, c.json()) }

// fail writes err and returns the exit code.
func (c *cli) fail(w io.Writer, err error) int {
	if !c.ran {
		var rep reported
		if !errors.As(err, &rep) {
			err = usageError{err}
		}
	}
	code := exitCode(err)
	var rep reported
	if !errors.As(err, &rep) {
		writeError(w, err, code, c.json())
	}
	return code
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// errorJSON is an error as -o json writes it to standard error.
type errorJSON struct {
	Error      string           `json:"error"`
	ExitCode   int              `json:"exit_code"`
	WorkflowID string           `json:"workflow_id,omitempty"`
	Failure    *starter.Failure `json:"failure,omitempty"`
}

// writeError writes err as one line, or as one JSON object.
func writeError(w io.Writer, err error, code int, asJSON bool) {
	msg := oneLine(err.Error())
	if !asJSON {
		_, _ = fmt.Fprintln(w, "siteops:", msg)
		return
	}
	e := errorJSON{Error: msg, ExitCode: code}
	var failed *starter.WorkflowFailedError
	var stopped *starter.ErrStoppedWaiting
	var deciding *starter.RotationNeedsDecisionError
	switch {
	case errors.As(err, &failed):
		e.WorkflowID, e.Failure = failed.WorkflowID, &failed.Cause
	case errors.As(err, &stopped):
		e.WorkflowID = stopped.WorkflowID
	case errors.As(err, &deciding):
		e.WorkflowID = deciding.WorkflowID
	}
	_ = json.NewEncoder(w).Encode(e)
}

// oneLine keeps an error message on one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "\r", "")
	for strings.Contains(s, "\n\n") {
		s = strings.ReplaceAll(s, "\n\n", "\n")
	}
	return strings.ReplaceAll(s, "\n", "; ")
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
