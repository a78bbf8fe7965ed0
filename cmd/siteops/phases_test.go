package main

import (
	"strings"
	"testing"
	"time"
)

// TestPhasesInAPipe checks that a pipe gets one line per phase, once the
// wait has lasted phaseQuiet, and no line for what changes within a phase
// or for a wait that ends sooner; with -o json, none at all.
func TestPhasesInAPipe(t *testing.T) {
	clock := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	var out strings.Builder
	p := newPhases(&out, false, false, now)
	p.set("creating", "onboarding/x: step creating-site")
	p.redraw()
	if out.String() != "" {
		t.Fatalf("a line before phaseQuiet: %q", out.String())
	}
	clock = clock.Add(phaseQuiet)
	p.redraw()
	p.redraw()
	p.set("creating", "onboarding/x: step creating-site")
	p.set("publishing", "onboarding/x: step publishing")
	clock = clock.Add(3 * time.Second)
	p.redraw()
	want := "siteops: onboarding/x: step creating-site (2s)\nsiteops: onboarding/x: step publishing (2s)\n"
	if out.String() != want {
		t.Errorf("a pipe got %q, want %q", out.String(), want)
	}

	out.Reset()
	j := newPhases(&out, false, true, now)
	j.set("a", "a")
	clock = clock.Add(time.Minute)
	j.redraw()
	if out.String() != "" {
		t.Errorf("with -o json a pipe got %q", out.String())
	}
}

// TestPhasesOnATerminal checks that a terminal gets the phase redrawn in
// place with the time waited, cut to the terminal's width, a line printed
// meanwhile above it, and the line erased at the end.
func TestPhasesOnATerminal(t *testing.T) {
	clock := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	var out strings.Builder
	p := newPhases(&out, true, true, func() time.Time { return clock })
	p.width = 30 // the line keeps to 29 columns: a full last column would wrap
	p.set("verifying", "secret-rotation/we_1: waiting-for-verified-delivery")
	clock = clock.Add(1500 * time.Millisecond)
	p.redraw()
	p.above(func() { out.WriteString("siteops: warning: Temporal is unavailable\n") })
	go p.tick(time.Hour)
	p.end()
	want := "\r\033[Ksecret-rotation/we_1: waitin…" +
		"\r\033[Ksecret-rotation/we_1: waitin…" +
		"\r\033[Ksiteops: warning: Temporal is unavailable\n" +
		"\r\033[Ksecret-rotation/we_1: waitin…" +
		"\r\033[K"
	if out.String() != want {
		t.Errorf("the terminal got\n%q\nwant\n%q", out.String(), want)
	}
}
