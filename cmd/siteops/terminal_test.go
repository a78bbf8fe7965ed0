package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/wiring"
)

// These tests run the built binary as on-call meets it: on a terminal (a
// pseudo-terminal: standard input and standard error on it, standard
// output apart) and in a pipe, against a store made for the test.

// inboxStore makes a store holding n pending lead.created events
// (evt_0 ... evt_n-1) and the stored secret of endpoint we_1, and returns
// it with the environment that names it.
func inboxStore(t *testing.T, n int) (*store.Store, []string) {
	t.Helper()
	url := "sqlite://" + t.TempDir() + "/siteops.db"
	key := base64.StdEncoding.EncodeToString(storetest.TestKey)
	st, _, err := wiring.OpenStore(t.Context(), config.Database{URL: url, SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	for i := range n {
		id := fmt.Sprintf("evt_%d", i)
		if _, err := st.RecordEvent(t.Context(), store.InboxEvent{EventID: id, EventType: "lead.created", Lane: store.LaneBulk, EndpointID: "env",
			ReceivedAt: time.Now().Add(-time.Duration(n-i) * time.Second), Body: []byte(`{"id":"` + id + `","type":"lead.created","data":{"site_id":"site_1"}}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.PutSecret(t.Context(), "we_1", "main", agentsite.NewSigningSecret("whsec_terminal_test")); err != nil {
		t.Fatal(err)
	}
	return st, []string{"HOME=" + t.TempDir(), "SITEOPS_DATABASE_URL=" + url, "SITEOPS_SECRET_KEY=" + key, "SITEOPS_OPERATOR=oncall-test", "TERM=xterm"}
}

// replays counts the events of st that were replayed.
func replays(t *testing.T, st *store.Store, n int) int {
	t.Helper()
	got := 0
	for i := range n {
		d, err := st.Event(t.Context(), fmt.Sprintf("evt_%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if d.Replays > 0 {
			got++
		}
	}
	return got
}

// onTerminal is the binary running with its standard input and standard
// error on a pseudo-terminal, and its standard output apart.
type onTerminal struct {
	cmd    *exec.Cmd
	tty    *os.File // the terminal's side the test types on and reads
	screen *siteopstest.Log
	stdout *siteopstest.Log
	exited chan error
}

func startOnTerminal(t *testing.T, env []string, args ...string) *onTerminal {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { _ = ptmx.Close() })
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 400}); err != nil {
		t.Fatal(err)
	}
	o := &onTerminal{tty: ptmx, screen: &siteopstest.Log{}, stdout: &siteopstest.Log{}, exited: make(chan error, 1)}
	o.cmd = exec.CommandContext(t.Context(), siteopsBinary(t), args...)
	o.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	o.cmd.Stdin, o.cmd.Stderr, o.cmd.Stdout = tty, tty, o.stdout
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = tty.Close() // the child holds it
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			_, _ = o.screen.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	go func() { o.exited <- o.cmd.Wait() }()
	return o
}

// await waits until the terminal shows want.
func (o *onTerminal) await(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(o.screen.String(), want) {
		select {
		case <-deadline:
			_ = o.cmd.Process.Kill()
			t.Fatalf("the terminal did not show %q within 30 s:\n%q", want, o.screen.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// typeLine types line and Enter.
func (o *onTerminal) typeLine(t *testing.T, line string) {
	t.Helper()
	if _, err := o.tty.Write([]byte(line + "\r")); err != nil {
		t.Fatal(err)
	}
}

// wait waits for the command to end and returns its exit code.
func (o *onTerminal) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-o.exited:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return o.cmd.ProcessState.ExitCode()
	case <-time.After(30 * time.Second):
		_ = o.cmd.Process.Kill()
		t.Fatalf("the command did not end within 30 s:\n%q", o.screen.String())
		return -1
	}
}

// TestBulkReplayAsksFirst replays 12 events (more than bulkReplay): a dry
// run lists them and says first that nothing changed; in a pipe without
// --yes it refuses naming --yes (exit 2); on a terminal it lists them and
// asks, and replays them only on yes; with --yes it replays them. Only
// that last one and the yes change the inbox.
func TestBulkReplayAsksFirst(t *testing.T) {
	const n = 12
	st, env := inboxStore(t, n)
	replay := []string{"events", "replay", "--outcome", "pending"}

	stdout, stderr, code := runBinary(t, t.TempDir(), env, append(replay, "--dry-run")...)
	if code != 0 || !strings.HasPrefix(stdout, "nothing changed (dry run); siteops events replay would queue 12 event(s) for the relay again, as oncall-test") {
		t.Errorf("--dry-run: exit %d\n%s%s", code, stdout, stderr)
	}
	for i := range n {
		if !strings.Contains(stdout, fmt.Sprintf("\n  evt_%d  lead.created  site_1  was pending", i)) {
			t.Errorf("--dry-run does not list evt_%d:\n%s", i, stdout)
		}
	}
	stdout, _, code = runBinary(t, t.TempDir(), env, append(replay, "--dry-run", "-o", "json")...)
	var dry struct {
		DryRun   bool              `json:"dry_run"`
		Changed  *bool             `json:"changed"`
		Replayed []json.RawMessage `json:"replayed"`
	}
	if err := json.Unmarshal([]byte(stdout), &dry); code != 0 || err != nil || !dry.DryRun || dry.Changed == nil || *dry.Changed || len(dry.Replayed) != n {
		t.Errorf("--dry-run -o json: exit %d, %+v (%v)\n%s", code, dry, err, stdout)
	}

	stdout, stderr, code = runBinary(t, t.TempDir(), env, replay...)
	want := "siteops: siteops events replay asks before it changes anything, and standard input is not a terminal to ask on: add --yes to queue 12 event(s) for the relay again"
	if code != exitUsage || !strings.HasPrefix(stderr, want) || !strings.HasSuffix(stderr, "nothing changed\n") || stdout != "" {
		t.Errorf("in a pipe without --yes: exit %d, stdout %q, stderr %q; want %d and %q…", code, stdout, stderr, exitUsage, want)
	}
	if got := replays(t, st, n); got != 0 {
		t.Fatalf("%d events replayed by a dry run or a refusal", got)
	}

	term := startOnTerminal(t, env, replay...)
	term.await(t, "siteops events replay will queue 12 event(s) for the relay again, as oncall-test")
	term.await(t, "Go ahead? Type yes to confirm: ")
	term.typeLine(t, "no")
	if code := term.wait(t); code != exitFailed || !strings.Contains(term.screen.String(), "siteops: not confirmed; nothing changed") {
		t.Errorf("answered no: exit %d\n%q", code, term.screen.String())
	}
	if got := replays(t, st, n); got != 0 {
		t.Fatalf("%d events replayed after no", got)
	}

	term = startOnTerminal(t, env, replay...)
	term.await(t, "Go ahead? Type yes to confirm: ")
	term.typeLine(t, "yes")
	if code := term.wait(t); code != 0 || !strings.Contains(term.stdout.String(), "replayed 12 event(s) as oncall-test") {
		t.Errorf("answered yes: exit %d\nterminal %q\nstdout %q", code, term.screen.String(), term.stdout.String())
	}
	if got := replays(t, st, n); got != n {
		t.Errorf("%d of %d events replayed after yes", got, n)
	}

	stdout, stderr, code = runBinary(t, t.TempDir(), env, append(replay, "--yes")...)
	if code != 0 || !strings.Contains(stdout, "replayed 12 event(s)") {
		t.Errorf("--yes: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestSecretRetireAsksFirst retires a stored secret, which cannot be
// undone: a dry run names the secret and when it would retire, first that
// nothing changed; a pipe without --yes is refused naming --yes; on a
// terminal it asks and retires it on yes.
func TestSecretRetireAsksFirst(t *testing.T) {
	st, env := inboxStore(t, 0)
	retired := func() bool {
		infos, err := st.RetiredSecrets(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return len(infos) == 1
	}
	stdout, stderr, code := runBinary(t, t.TempDir(), env, "secret", "retire", "--endpoint", "we_1", "--dry-run")
	if code != 0 || !strings.HasPrefix(stdout, "nothing changed (dry run); siteops secret retire would retire the secret of endpoint we_1 (receiver main, fingerprint ") ||
		!strings.Contains(stdout, "cannot be undone") {
		t.Errorf("--dry-run: exit %d\n%s%s", code, stdout, stderr)
	}
	_, stderr, code = runBinary(t, t.TempDir(), env, "secret", "retire", "--endpoint", "we_1")
	if code != exitUsage || !strings.Contains(stderr, "add --yes to retire the secret of endpoint we_1") {
		t.Errorf("in a pipe without --yes: exit %d, %q", code, stderr)
	}
	if retired() {
		t.Fatal("a dry run or a refusal retired the secret")
	}
	term := startOnTerminal(t, env, "secret", "retire", "--endpoint", "we_1")
	term.await(t, "siteops secret retire will retire the secret of endpoint we_1")
	term.await(t, "Go ahead? Type yes to confirm: ")
	term.typeLine(t, "yes")
	if code := term.wait(t); code != 0 || !strings.Contains(term.stdout.String(), "secret of endpoint we_1 (receiver main") {
		t.Errorf("answered yes: exit %d\nterminal %q\nstdout %q", code, term.screen.String(), term.stdout.String())
	}
	if !retired() {
		t.Error("the secret is not retired after yes")
	}
}

// TestWaitShowsItsPhase waits for the relay with none running (events
// replay --wait): on a terminal the phase is drawn in place on standard
// error, with the time waited, and erased when Ctrl-C ends the wait; in a
// pipe it is one line, once the wait has lasted phaseQuiet, and standard
// output stays the result.
func TestWaitShowsItsPhase(t *testing.T) {
	_, env := inboxStore(t, 1)
	const phase = "waiting for the relay of a running siteops ingress to dispatch 1 replayed event(s)"

	term := startOnTerminal(t, env, "events", "replay", "evt_0", "--wait", "--timeout", "0")
	term.await(t, "\r\033[K"+phase+" (1s)")
	if err := term.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := term.wait(t); code != exitInterrupted {
		t.Errorf("interrupted: exit %d\n%q", code, term.screen.String())
	}
	screen := term.screen.String()
	if i := strings.LastIndex(screen, phase); !strings.Contains(screen[i:], "\r\033[Ksiteops: stopped waiting;") {
		t.Errorf("the phase's line was not erased before the outcome:\n%q", screen)
	}
	if strings.Contains(term.stdout.String(), phase) {
		t.Errorf("the phase went to standard output: %q", term.stdout.String())
	}

	stdout, stderr, code := runBinary(t, t.TempDir(), env, "events", "replay", "evt_0", "--wait", "--timeout", "4s")
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code != exitFailed || len(lines) != 2 || !strings.HasPrefix(lines[0], "siteops: "+phase+" (") || !strings.Contains(lines[1], "not dispatched after 4s") {
		t.Errorf("in a pipe: exit %d, stderr:\n%s\nwant the phase once, then the outcome", code, stderr)
	}
	if strings.Contains(stdout, phase) || !strings.Contains(stdout, "replayed 1 event(s)") {
		t.Errorf("standard output in a pipe: %q", stdout)
	}
	_, stderr, _ = runBinary(t, t.TempDir(), env, "events", "replay", "evt_0", "--wait", "--timeout", "3s", "-o", "json")
	var e errorJSON
	if err := json.Unmarshal([]byte(stderr), &e); err != nil || e.ExitCode != exitFailed {
		t.Errorf("with -o json in a pipe, standard error is not the one JSON error (%v):\n%s", err, stderr)
	}
}

// TestBareSiteopsPrintsHelp runs siteops alone: its help, exit 0, as
// temporal, kubectl and gh do.
func TestBareSiteopsPrintsHelp(t *testing.T) {
	stdout, stderr, code := runBinary(t, t.TempDir(), nil)
	if code != 0 || !strings.Contains(stdout, "Usage:\n  siteops [flags]\n  siteops [command]") || !strings.Contains(stdout, "completion") || stderr != "" {
		t.Errorf("siteops alone: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestCompletion checks the shell's completions as the shell asks for
// them (siteops __complete): fixed values, the store's endpoints, and a
// Temporal that does not answer, which offers nothing, says nothing and
// does not hold the shell.
func TestCompletion(t *testing.T) {
	_, env := inboxStore(t, 0)
	// A Temporal that accepts connections and never answers.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	env = append(env, "TEMPORAL_ADDRESS="+l.Addr().String())
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"events", "list", "--outcome", "d"}, []string{"dead"}},
		{[]string{"events", "replay", "--outcome", ""}, []string{"signalled", "no-target", "target-gone", "ignored", "malformed", "dead", "failing", "pending"}},
		{[]string{"secret", "retire", "--endpoint", ""}, []string{"we_1"}},
		{[]string{"secret", "abort", "--endpoint", "we"}, []string{"we_1"}},
		{[]string{"webhook", "create", "--receiver", ""}, []string{"main"}},
		{[]string{"status", "-o", "js"}, []string{"json", "jsonl"}},
		{[]string{"embed", "off", "--site", ""}, nil},
		{[]string{"status", ""}, nil},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			began := time.Now()
			stdout, stderr, code := runBinary(t, t.TempDir(), env, append([]string{"__complete"}, tc.args...)...)
			if took := time.Since(began); took > 2*completionBudget+siteopstest.Bound(time.Second) {
				t.Errorf("took %s", took)
			}
			lines := strings.Split(strings.TrimSpace(stdout), "\n")
			got, directive := lines[:len(lines)-1], lines[len(lines)-1]
			if code != 0 || strings.Join(got, " ") != strings.Join(tc.want, " ") || directive != ":4" {
				t.Errorf("exit %d, offered %q (%s); want %q and no files (:4)", code, got, directive, tc.want)
			}
			if strings.TrimSpace(stderr) != "Completion ended with directive: ShellCompDirectiveNoFileComp" {
				t.Errorf("standard error holds more than cobra's note: %q", stderr)
			}
		})
	}
	stdout, _, code := runBinary(t, t.TempDir(), nil, "completion", "bash")
	if code != 0 || !strings.Contains(stdout, "__start_siteops") {
		t.Errorf("completion bash: exit %d", code)
	}
}

// TestListsAsJSONLines lists events with -o jsonl: one JSON object a line,
// the page's events, and where more match, the next page on standard
// error as the JSON warning.
func TestListsAsJSONLines(t *testing.T) {
	_, env := inboxStore(t, 7)
	stdout, stderr, code := runBinary(t, t.TempDir(), env, "events", "list", "--limit", "5", "-o", "jsonl")
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if code != 0 || len(lines) != 5 {
		t.Fatalf("exit %d, %d lines, want 5:\n%s%s", code, len(lines), stdout, stderr)
	}
	for i, line := range lines {
		var e struct {
			EventID string `json:"event_id"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.EventID != fmt.Sprintf("evt_%d", 6-i) {
			t.Errorf("line %d = %s (%v); want evt_%d, newest first", i, line, err, 6-i)
		}
	}
	var w struct {
		Warning string `json:"warning"`
	}
	if err := json.Unmarshal([]byte(stderr), &w); err != nil || !strings.Contains(w.Warning, "siteops events list --limit 5 --page ") {
		t.Errorf("standard error %q (%v); want the next page as a JSON warning", stderr, err)
	}
}
