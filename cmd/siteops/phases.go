package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/starter"
)

// phaseQuiet is how long a wait goes before it writes its phase where
// standard error is not a terminal: a wait that ends sooner leaves
// standard error to its outcome, one line, as scripts read it.
const phaseQuiet = 2 * time.Second

// phaseEvery is how often the wait's line is redrawn on a terminal (the
// time it has waited) and the workflow it waits on is asked where it
// stands.
const phaseEvery = time.Second

// phases shows what a command is waiting for while it waits, on standard
// error. On a terminal it is one line redrawn in place — where the wait
// stands and how long it has lasted — and erased when the wait ends, so
// that the result prints as it would without it. Elsewhere (a pipe, a log
// file) it writes one line per phase change, "siteops: " first, once the
// wait has lasted phaseQuiet. With -o json outside a terminal it writes
// nothing: standard error is then the one JSON error.
type phases struct {
	w     io.Writer
	tty   bool
	off   bool
	width int // the terminal's columns; 0 when not known
	began time.Time
	now   func() time.Time

	mu      sync.Mutex
	key     string // the phase: a pipe gets a line when it changes
	line    string // the phase in words
	written string // the key last written to a pipe
	drawn   bool   // a line is drawn in place on the terminal
	stop    chan struct{}
	stopped chan struct{}
}

// phases starts showing what cmd waits for, with first as its phase
// until set says otherwise; end stops it. Notes and warnings the command
// prints meanwhile go above the line (c.warn, c.note).
func (c *cli) phases(cmd *cobra.Command, first string) *phases {
	w := cmd.ErrOrStderr()
	p := newPhases(w, isTerminal(w), c.json(), time.Now)
	p.width = terminalWidth(w)
	p.set(first, first)
	c.waiting = p
	go p.tick(phaseEvery)
	return p
}

func newPhases(w io.Writer, tty, jsonOut bool, now func() time.Time) *phases {
	return &phases{w: w, tty: tty, off: jsonOut && !tty, began: now(), now: now, stop: make(chan struct{}), stopped: make(chan struct{})}
}

// set makes key the wait's phase and line its words.
func (p *phases) set(key, line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.key, p.line = key, line
	p.show()
}

// tick redraws the line every interval until end.
func (p *phases) tick(every time.Duration) {
	defer close(p.stopped)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.redraw()
		}
	}
}

// redraw draws the phase again: the time waited on a terminal, the line
// a pipe gets once the wait has lasted phaseQuiet.
func (p *phases) redraw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.show()
}

// show draws the phase: in place on a terminal, as a line of its own in
// a pipe when it changed and the wait has lasted phaseQuiet. p.mu is held.
func (p *phases) show() {
	if p.off || p.line == "" {
		return
	}
	waited := p.now().Sub(p.began)
	line := fmt.Sprintf("%s (%s)", p.line, waited.Truncate(time.Second))
	if p.tty {
		if p.width > 1 && utf8.RuneCountInString(line) >= p.width {
			line = string([]rune(line)[:p.width-2]) + "…"
		}
		_, _ = fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.drawn = true
		return
	}
	if p.key != p.written && waited >= phaseQuiet {
		_, _ = fmt.Fprintln(p.w, "siteops: "+line)
		p.written = p.key
	}
}

// above runs print, which writes a line of its own, above the phase's
// line.
func (p *phases) above(print func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.erase()
	print()
	p.show()
}

// erase clears the line drawn in place. p.mu is held.
func (p *phases) erase() {
	if p.drawn {
		_, _ = fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

// end stops showing the phase and erases its line.
func (p *phases) end() {
	close(p.stop)
	<-p.stopped
	p.mu.Lock()
	defer p.mu.Unlock()
	p.erase()
	p.line = ""
}

// watch shows, until the stop it returns is called, where the workflow
// id stands while cmd waits on it (first until the workflow says): its
// status query's summary, and an activity it retries.
func (c *cli) watch(cmd *cobra.Command, s *starter.Starter, id, first string) (stop func()) {
	p := c.phases(cmd, id+": "+first)
	ctx, cancel := context.WithCancel(cmd.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.WatchPhases(ctx, id, phaseEvery, func(ph starter.Phase) { p.set(ph.Key, ph.Line) })
	}()
	return func() {
		cancel()
		<-done
		c.endWait()
	}
}

// endWait ends the phases of the command's wait, if any.
func (c *cli) endWait() {
	if c.waiting != nil {
		c.waiting.end()
		c.waiting = nil
	}
}
