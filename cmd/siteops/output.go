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
	"golang.org/x/term"

	"github.com/siteops/siteops/starter"
)

// This file is the CLI's one printer: whatever a command says goes
// through it, so that -o json is decided here and nowhere else. A
// command's result goes to standard output, as indented JSON with -o json,
// as one line of JSON per object with -o jsonl (a list one item a line),
// or as the text its command words; warnings, notes, progress and errors
// go to standard error.

// show prints a command's result: v as JSON with -o json (indented) or -o
// jsonl (one line), else what text writes. text's error is the command's:
// a text result may end in one that the JSON result states as a field
// instead.
func (c *cli) show(cmd *cobra.Command, v any, text func(w io.Writer) error) error {
	if c.output == "jsonl" {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(v)
	}
	if c.json() {
		return writeJSON(cmd.OutOrStdout(), v)
	}
	return text(cmd.OutOrStdout())
}

// showList is show for a list command's result v: with -o jsonl it
// prints v's items, one JSON object a line, instead (writeJSONLines).
func (c *cli) showList(cmd *cobra.Command, v, items any, text func(w io.Writer) error) error {
	if c.output == "jsonl" {
		return writeJSONLines(cmd.OutOrStdout(), items)
	}
	return c.show(cmd, v, text)
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
		c.aboveWait(func() { _, _ = fmt.Fprintf(cmd.ErrOrStderr(), "siteops: "+format+"\n", args...) })
	}
}

// warn tells the person something that does not stop the command.
func (c *cli) warn(w io.Writer, msg string) {
	c.aboveWait(func() {
		if c.json() {
			_ = json.NewEncoder(w).Encode(map[string]string{"warning": msg})
			return
		}
		_, _ = fmt.Fprintln(w, "siteops: warning:", msg)
	})
}

// aboveWait prints a line of its own above the line a wait draws in
// place, if one is drawn.
func (c *cli) aboveWait(print func()) {
	if c.waiting == nil {
		print()
		return
	}
	c.waiting.above(print)
}

// progress draws a changing status line on w; with -o json it draws none.
func (c *cli) progress(w io.Writer) *progress { return newProgress(w, c.json()) }

// fail writes err and returns the exit code.
func (c *cli) fail(w io.Writer, err error) int {
	c.endWait()
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

// isTerminal reports whether v (a writer or a reader) is a terminal, where
// progress may redraw a line in place and a question may be asked; pipes,
// log files and /dev/null get plain lines and no question.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) //nolint:gosec // a file descriptor fits an int
}

// terminalWidth is the width of the terminal w, 0 when it is none or
// cannot be told.
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	width, _, err := term.GetSize(int(f.Fd())) //nolint:gosec // a file descriptor fits an int
	if err != nil {
		return 0
	}
	return width
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

// writeJSONLines writes each element of the slice items as one line of
// JSON.
func writeJSONLines(w io.Writer, items any) error {
	b, err := json.Marshal(items)
	if err != nil {
		return err
	}
	var each []json.RawMessage
	if err := json.Unmarshal(b, &each); err != nil {
		return fmt.Errorf("jsonl: %w", err)
	}
	for _, e := range each {
		if _, err := fmt.Fprintf(w, "%s\n", e); err != nil {
			return err
		}
	}
	return nil
}
