package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/relay"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/wiring"
)

// TestReplayWaitInterrupted interrupts `events replay --wait` with no
// ingress to dispatch the event, as Ctrl-C does: it exits 130 saying that
// it stopped waiting and that the event stays queued, never "context
// canceled", and does not claim the relay dispatched it.
func TestReplayWaitInterrupted(t *testing.T) {
	url := "sqlite://" + t.TempDir() + "/siteops.db"
	st, _, err := wiring.OpenStore(t.Context(), config.Database{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	if _, err := st.RecordEvent(t.Context(), store.InboxEvent{EventID: "evt_wait", EventType: "lead.created", Lane: store.LaneBulk,
		EndpointID: "env", ReceivedAt: time.Now(), Body: []byte(`{"id":"evt_wait","type":"lead.created","data":{"site_id":"site_1"}}`)}); err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(t.Context(), siteopsBinary(t), "events", "replay", "evt_wait", "--wait", "--timeout", "0")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "SITEOPS_DATABASE_URL=" + url, "SITEOPS_OPERATOR=oncall-test"}
	var stdout, stderr siteopstest.Log
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The replay is recorded before the wait begins.
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := st.Event(t.Context(), "evt_wait")
		if err != nil {
			t.Fatal(err)
		}
		if d.Replays > 0 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the replay was not recorded within 10s\n%s%s", stdout.String(), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	want := "siteops: stopped waiting; 1 of 1 replayed event(s) stay queued and the relay of a running siteops ingress dispatches them — siteops events list --pending\n"
	if code != exitInterrupted || stderr.String() != want {
		t.Errorf("exit %d (%v), stderr %q; want %d and %q", code, err, stderr.String(), exitInterrupted, want)
	}
	if strings.Contains(stderr.String(), "context canceled") || strings.Contains(stdout.String(), "the relay dispatched them") {
		t.Errorf("an interrupted wait said %q / %q", stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "replayed 1 event(s) as oncall-test: queued for the relay") {
		t.Errorf("stdout %q does not say the event is queued", stdout.String())
	}
}

// TestReplayHelpSaysWhatTargetsRemember checks that events replay's help
// tells what each workflow remembers of event ids as the route table says
// it (a lead sync's count is workflows.RecentEventsKept), not in words of
// its own.
func TestReplayHelpSaysWhatTargetsRemember(t *testing.T) {
	out, err := runCLI(t, "", "events", "replay", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range relay.Memories() {
		if !strings.Contains(out, "  - "+m+"\n") {
			t.Errorf("events replay --help does not say %q:\n%s", m, out)
		}
	}
}
