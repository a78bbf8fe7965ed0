package e2e

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/siteops/siteops/internal/siteopstest"
)

// TestDemoCtrlCLeavesNoProcess runs `siteops demo --keep`, interrupts it
// once everything is up, and checks that no process of it is left.
func TestDemoCtrlCLeavesNoProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(binary, "demo", "--keep", "--leads", "10", "--dir", dir)
	cmd.Env = os.Environ()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "everything keeps running") {
				close(ready)
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case <-ready:
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the demo did not come up")
	}
	if len(processesMentioning(t, dir)) < 2 { // the demo and its dev server
		t.Fatalf("expected the demo and its dev server to mention %s; found %v", dir, processesMentioning(t, dir))
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the demo exited with %v after Ctrl-C", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the demo did not stop after Ctrl-C")
	}
	// The dev server was started with the demo's directory in its arguments.
	siteopstest.Eventually(t, 10*time.Second, "no process of the demo left", func() bool { return len(processesMentioning(t, dir)) == 0 })
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
