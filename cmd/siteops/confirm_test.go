package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestConfirm checks the one way a costly command goes ahead: a dry run
// says first that nothing changed and goes no further; --yes goes ahead;
// on a terminal only yes does; elsewhere it is a usage error naming --yes.
func TestConfirm(t *testing.T) {
	ch := change{Summary: "retire the secret of endpoint we_1 now", Items: []string{"it cannot be undone"}}
	for _, tc := range []struct {
		name        string
		flags       confirmFlags
		output      string
		terminal    bool
		answer      string
		ok          bool
		code        int // of the error; 0 none
		stdout, err string
	}{
		{name: "dry run", flags: confirmFlags{dryRun: true}, stdout: "nothing changed (dry run); x y would retire the secret of endpoint we_1 now:\n  it cannot be undone\n"},
		{name: "dry run -o json", flags: confirmFlags{dryRun: true}, output: "json",
			stdout: `"dry_run": true,` + "\n" + `  "changed": false,` + "\n" + `  "command": "x y",`},
		{name: "--yes", flags: confirmFlags{yes: true}, ok: true},
		{name: "--yes and --dry-run", flags: confirmFlags{yes: true, dryRun: true}, stdout: "nothing changed (dry run)"},
		{name: "a pipe", code: exitUsage, err: "x y asks before it changes anything, and standard input is not a terminal to ask on: add --yes to retire the secret of endpoint we_1 now (--dry-run says exactly what would change); nothing changed"},
		{name: "a terminal, yes", terminal: true, answer: "yes\n", ok: true},
		{name: "a terminal, y", terminal: true, answer: "Y\n", ok: true},
		{name: "a terminal, no", terminal: true, answer: "no\n", code: exitFailed, err: "not confirmed; nothing changed"},
		{name: "a terminal, Enter", terminal: true, answer: "\n", code: exitFailed, err: "not confirmed; nothing changed"},
		{name: "a terminal, end of input", terminal: true, answer: "", code: exitFailed, err: "not confirmed; nothing changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI()
			c.output = "text"
			if tc.output != "" {
				c.output = tc.output
			}
			c.interactive = func(*cobra.Command) bool { return tc.terminal }
			parent := &cobra.Command{Use: "x"}
			cmd := &cobra.Command{Use: "y"}
			parent.AddCommand(cmd)
			var stdout, stderr bytes.Buffer
			cmd.SetOut(&stdout)
			cmd.SetErr(&stderr)
			cmd.SetIn(strings.NewReader(tc.answer))
			cmd.SetContext(t.Context())
			ok, err := c.confirm(cmd, &tc.flags, ch)
			if ok != tc.ok {
				t.Errorf("went ahead: %v, want %v", ok, tc.ok)
			}
			switch {
			case tc.code == 0 && err != nil:
				t.Errorf("error %v", err)
			case tc.code != 0 && (err == nil || exitCode(err) != tc.code || err.Error() != tc.err):
				t.Errorf("error %v (exit %d), want %q (exit %d)", err, exitCode(err), tc.err, tc.code)
			}
			if !strings.Contains(stdout.String(), tc.stdout) || tc.stdout == "" && stdout.Len() > 0 {
				t.Errorf("standard output %q, want %q", stdout.String(), tc.stdout)
			}
			if tc.terminal && !strings.HasPrefix(stderr.String(), "x y will retire the secret of endpoint we_1 now:\n  it cannot be undone\nGo ahead? Type yes to confirm: ") {
				t.Errorf("the question: %q", stderr.String())
			}
		})
	}
}

// TestCostlyCommandsAskFirst checks that the bulk and irreversible commands
// take --dry-run and --yes, from confirmFlags, and that embed off, the
// emergency brake, takes neither.
func TestCostlyCommandsAskFirst(t *testing.T) {
	root := newCLI().root()
	for _, path := range [][]string{{"events", "replay"}, {"secret", "abort"}, {"secret", "proceed"}, {"secret", "retire"}, {"release", "finalize"}} {
		cmd, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"dry-run", "yes"} {
			f := cmd.Flags().Lookup(name)
			var want confirmFlags
			var probe cobra.Command
			want.register(&probe)
			if f == nil || f.Usage != probe.Flags().Lookup(name).Usage {
				t.Errorf("%s has no --%s of confirmFlags", cmd.CommandPath(), name)
			}
		}
	}
	off, _, err := root.Find([]string{"embed", "off"})
	if err != nil {
		t.Fatal(err)
	}
	if off.Flags().Lookup("yes") != nil || off.Flags().Lookup("dry-run") != nil {
		t.Error("embed off, the emergency brake, asks for confirmation")
	}
}
