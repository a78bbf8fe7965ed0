package e2e

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/siteops/siteops/demo"
	"github.com/siteops/siteops/internal/siteopstest"
)

// TestDemoCtrlCLeavesNoProcess runs `siteops demo --keep` with its output
// in a pipe (as `make demo ... | tee` does), pastes the lines it printed
// into an interactive bash on a pseudo-terminal, where on-call's commands
// then read every source of the running demo, interrupts it once
// everything is up, and checks that no process of it is left.
func TestDemoCtrlCLeavesNoProcess(t *testing.T) {
	d := startKeptDemo(t, false)
	checkShellLines(t, d, "")
	if len(processesMentioning(t, d.dir)) < 2 { // the demo and its dev server
		t.Fatalf("expected the demo and its dev server to mention %s; found %v", d.dir, processesMentioning(t, d.dir))
	}
	t.Run("its lines pasted into a terminal", func(t *testing.T) {
		if _, err := exec.LookPath("bash"); err != nil {
			if os.Getenv(RequireCurlEnv) == "1" {
				t.Fatalf("pasting the demo's lines needs bash, which is not on PATH; %s=1 makes this a failure", RequireCurlEnv)
			}
			t.Skip("SKIP: pasting the demo's lines needs bash")
		}
		sh := startTerminalShell(t)
		sh.paste(t, strings.Join(d.shell, "\n"))
		for _, c := range []struct{ command, want string }{
			{"siteops overview", "siteops overview at"},
			{"siteops embed list --all", "site_1"},
			{"siteops events list --refused --since 1h", "refused"},
			{"siteops secret list", "demo-v2"},
		} {
			out := sh.run(t, c.command)
			if !strings.Contains(out, c.want) || strings.Contains(out, "UNAVAILABLE") {
				t.Errorf("%s in the pasted shell printed, with nothing unavailable, no %q:\n%s", c.command, c.want, out)
			}
		}
	})
	d.interrupt(t)
	// The dev server was started with the demo's directory in its arguments.
	siteopstest.Eventually(t, 10*time.Second, "no process of the demo left", func() bool { return len(processesMentioning(t, d.dir)) == 0 })
}

// keptDemo is `siteops demo --keep`, the built binary, running until the
// test ends.
type keptDemo struct {
	dir    string
	cmd    *exec.Cmd
	out    *siteopstest.Log // what it printed: standard output and error
	exited chan error
	// shell is the lines it printed to paste into another shell.
	shell []string
}

// startKeptDemo starts the demo in a directory of the test's with env
// added to the test's environment (without any payload key of its own),
// its output on a pseudo-terminal or in a pipe, and returns once it has
// printed the lines to paste. It is interrupted, as Ctrl-C does, when the
// test ends.
func startKeptDemo(t *testing.T, onTerminal bool, env ...string) *keptDemo {
	t.Helper()
	d := &keptDemo{dir: t.TempDir(), out: &siteopstest.Log{}, exited: make(chan error, 1)}
	d.cmd = exec.Command(binary, "demo", "--keep", "--leads", "10", "--dir", d.dir) //nolint:gosec // the binary under test
	d.cmd.Env = append(environWithout("SITEOPS_PAYLOAD_KEY", "SITEOPS_PAYLOAD_KEY_FILE"), env...)
	if onTerminal {
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Skipf("no pseudo-terminal here: %v", err)
		}
		t.Cleanup(func() { _ = ptmx.Close() })
		if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 50, Cols: 200}); err != nil {
			t.Fatal(err)
		}
		d.cmd.Stdin, d.cmd.Stdout, d.cmd.Stderr = tty, tty, tty
		d.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
		if err := d.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		_ = tty.Close() // the demo holds it
		go func() { _, _ = io.Copy(d.out, ptmx) }()
	} else {
		d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
		if err := d.cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	go func() { d.exited <- d.cmd.Wait() }()
	t.Cleanup(func() { d.interrupt(t) })
	siteopstest.EventuallyNil(t, 3*time.Minute, "the demo to print the lines to paste", func() error {
		select {
		case err := <-d.exited:
			d.exited <- err
			t.Fatalf("the demo exited (%v) before it printed the lines to paste:\n%s", err, d.out.String())
		default:
		}
		var err error
		d.shell, err = shellLines(d.out.String())
		return err
	})
	return d
}

// interrupt sends the demo SIGINT, as Ctrl-C does, once, and waits for it
// to exit 0.
func (d *keptDemo) interrupt(t *testing.T) {
	t.Helper()
	select {
	case err := <-d.exited:
		d.exited <- err // already over
		return
	default:
	}
	if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.exited:
		d.exited <- err
		if err != nil {
			t.Errorf("the demo exited with %v after Ctrl-C", err)
		}
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		t.Fatal("the demo did not stop after Ctrl-C")
	}
}

// shellLines returns the lines the demo printed under demo.ShellHeader,
// up to the empty line that ends them; on a terminal its lines end in
// CR LF, and a line redrawn in place shows what followed its last CR.
func shellLines(out string) ([]string, error) {
	_, block, ok := strings.Cut(strings.ReplaceAll(out, "\r\n", "\n"), demo.ShellHeader+"\n\n")
	if !ok {
		return nil, fmt.Errorf("no %q yet", demo.ShellHeader)
	}
	block, _, ok = strings.Cut(block, "\n\n")
	if !ok {
		return nil, fmt.Errorf("the lines to paste have not ended yet")
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if i := strings.LastIndexByte(l, '\r'); i >= 0 {
			l = l[i+1:]
		}
		if !strings.HasPrefix(l, "export ") && !strings.HasPrefix(l, "unset ") {
			return nil, fmt.Errorf("a line to paste neither exports nor unsets: %q", l)
		}
		lines = append(lines, l)
	}
	return lines, nil
}

// environWithout is the test's environment without the named variables.
func environWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, name) {
			env = append(env, kv)
		}
	}
	return env
}

// shellEnvironment is what a new terminal of an on-call engineer holds
// before they paste the demo's lines: the system's PATH (bash, curl) and
// a home of its own, so that no profile or config file of this machine's
// user is read.
func shellEnvironment(t *testing.T) []string {
	t.Helper()
	home := t.TempDir()
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"), "SITEOPS_OPERATOR=docs-reader", "TERM=dumb", "LANG=C.UTF-8"}
}

// terminalShell is an interactive bash on a pseudo-terminal, typed into
// as a person does.
type terminalShell struct {
	tty    *os.File
	screen *siteopstest.Log
	runs   int
}

func startTerminalShell(t *testing.T) *terminalShell {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 50, Cols: 400}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "bash", "--norc", "--noprofile", "--noediting", "-i")
	cmd.Env = shellEnvironment(t)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = tty.Close()
	sh := &terminalShell{tty: ptmx, screen: &siteopstest.Log{}}
	done := make(chan struct{})
	go func() { _, _ = io.Copy(sh.screen, ptmx); close(done) }()
	t.Cleanup(func() {
		_, _ = ptmx.Write([]byte("exit\n"))
		_ = cmd.Wait()
		_ = ptmx.Close()
		<-done
	})
	return sh
}

// paste types text as a paste does, then Enter, and waits until the
// shell has taken all of it, the last line exiting 0.
func (sh *terminalShell) paste(t *testing.T, text string) {
	t.Helper()
	sh.run(t, text)
}

// run types command, then a line that prints its exit status and a mark
// (written so that the echo of the typing never shows the mark), waits for
// the mark, fails the test unless the command exited 0, and returns what
// the terminal showed after the command was typed.
func (sh *terminalShell) run(t *testing.T, command string) string {
	t.Helper()
	sh.runs++
	mark := 7000 + sh.runs
	from := len(sh.screen.String())
	if _, err := fmt.Fprintf(sh.tty, "%s\necho \"exit=$? mark=$((7000+%d))\"\n", command, sh.runs); err != nil {
		t.Fatal(err)
	}
	done := regexp.MustCompile(`exit=(\d+) mark=` + strconv.Itoa(mark))
	var m []string
	siteopstest.Eventually(t, 2*time.Minute, "the shell to run "+command, func() bool {
		m = done.FindStringSubmatch(sh.screen.String()[from:])
		return m != nil
	})
	out := sh.screen.String()[from:]
	if m[1] != "0" {
		t.Errorf("%s exited %s in the pasted shell:\n%s", command, m[1], out)
	}
	return out
}

// processesMentioning lists the pids whose command line contains s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("cannot list processes: %v", err)
	}
	var pids []string
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), s) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
