package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"go.temporal.io/api/serviceerror"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/doctor"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/wiring"
)

// TestExitCodesOfStartUpAndStoreErrors checks the codes of what doctor and
// the start-up checks report about the store and the secret key, however
// deeply they are wrapped.
func TestExitCodesOfStartUpAndStoreErrors(t *testing.T) {
	refused := &wiring.PreflightError{Process: "ingress", Result: doctor.Result{Check: "secret key", Status: doctor.Fail,
		Err: fmt.Errorf("1 of 1 stored secrets do not decrypt: %w", store.ErrKeyMismatch)}}
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"no database yet", fmt.Errorf("%w at sqlite:///x/siteops.db: start the worker", wiring.ErrNoStore), exitNotFound},
		{"a database not migrated", fmt.Errorf("schema version 3: %w", doctor.ErrNotMigrated), exitFailed},
		{"a key that cannot read the stored secrets", refused, exitAuth},
		{"a bad setting", config.Invalid("SITEOPS_LOG_FORMAT=%q: use text or json", "xml"), exitUsage},
		{"no secret key beside stored secrets", &wiring.PreflightError{Process: "ingress", Result: doctor.Result{Check: "secret key", Status: doctor.Fail,
			Err: fmt.Errorf("SITEOPS_SECRET_KEY is not set, and the store holds 1 active webhook secret(s): %w", store.ErrNoSecretKey)}}, exitUsage},
		{"a database that does not answer", fmt.Errorf("opening: %w", store.ErrUnreachable), exitUnreachable},
		{"Temporal without an answer until --timeout", &starter.UnavailableError{Address: "127.0.0.1:7233", What: "starting onboarding/x", Attempts: 3,
			Err: serviceerror.NewDeadlineExceeded("context deadline exceeded")}, exitUnreachable},
		{"Temporal unavailable while waiting", &starter.UnavailableError{What: "waiting for onboarding/x", Attempts: 2,
			Err: &starter.ErrStoppedWaiting{WorkflowID: "onboarding/x", Cause: context.DeadlineExceeded}}, exitUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitCode(tc.err); got != tc.want {
				t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}

// TestExitCodesHelpMatchesTheREADME checks that `siteops --help` and the
// README's table give the same codes with the same meanings.
func TestExitCodesHelpMatchesTheREADME(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, found := strings.Cut(string(b), "| exit code | meaning |\n|---|---|\n")
	if !found {
		t.Fatal("the README has no exit code table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	readme := map[string]string{}
	var order []string
	for row := range strings.SplitSeq(table, "\n") {
		cells := strings.Split(strings.Trim(row, "| "), " | ")
		if len(cells) != 2 {
			t.Fatalf("README row %q is not | code | meaning |", row)
		}
		readme[cells[0]] = strings.ReplaceAll(cells[1], "`", "")
		order = append(order, cells[0])
	}

	help := map[string]string{}
	code := ""
	for line := range strings.SplitSeq(strings.TrimPrefix(exitCodesHelp, "Exit codes:\n"), "\n") {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(line, "   ") {
			code = f[0]
			help[code] = strings.Join(f[1:], " ")
			continue
		}
		help[code] += " " + strings.Join(strings.Fields(line), " ")
	}
	out, err := runCLI(t, "", "--help")
	if err != nil || !strings.Contains(out, exitCodesHelp) {
		t.Errorf("--help does not show the exit codes (%v):\n%s", err, out)
	}

	if len(help) != len(readme) {
		t.Errorf("--help lists %d exit codes, the README %d", len(help), len(readme))
	}
	for _, c := range order {
		if help[c] != readme[c] {
			t.Errorf("exit code %s:\n--help: %q\nREADME: %q", c, help[c], readme[c])
		}
	}
	for _, code := range []int{exitOK, exitFailed, exitUsage, exitNotFound, exitAuth, exitUnreachable, exitInterrupted} {
		if _, ok := readme[strconv.Itoa(code)]; !ok {
			t.Errorf("the README does not document exit code %d", code)
		}
	}
}
