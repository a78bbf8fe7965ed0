package main

import (
	"encoding/base64"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// TestStoreCommandsCreateNoStore runs, through the binary, every command
// that works on the store but is neither the worker nor the ingress, where
// no store exists: each exits 3 with one line naming the store and the
// fix, and leaves no file behind; the same commands work once a worker
// has made the store. On PostgreSQL, a database no siteops process
// migrated is refused the same way, and its password is never printed.
func TestStoreCommandsCreateNoStore(t *testing.T) {
	spec, err := filepath.Abs("../../examples/acme-anvils.yaml") // it has a knowledge file: onboard stores its text
	if err != nil {
		t.Fatal(err)
	}
	commands := [][]string{
		{"events", "list"},
		{"events", "show", "evt_1"},
		{"events", "replay", "evt_1"},
		{"secret", "retire", "--endpoint", "we_1"},
		{"secret", "rekey"},
		{"onboard", "-f", spec},
	}
	home, state := t.TempDir(), t.TempDir()
	env := []string{"HOME=" + home, "XDG_STATE_HOME=" + state, "TEMPORAL_ADDRESS=127.0.0.1:1",
		"SITEOPS_SECRET_KEY=" + base64.StdEncoding.EncodeToString(storetest.TestKey)}
	path := filepath.Join(state, "siteops", "siteops.db")
	for _, args := range commands {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			stdout, stderr, code := runBinary(t, t.TempDir(), env, args...)
			want := "siteops: no siteops database at sqlite://" + path + ": start the worker"
			if code != exitNotFound || !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "SITEOPS_DATABASE_URL") || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want %d and one line starting %q naming SITEOPS_DATABASE_URL", code, stderr, exitNotFound, want)
			}
			if strings.Contains(stdout, "empty") {
				t.Errorf("stdout %q speaks of an empty inbox", stdout)
			}
			if _, err := os.Stat(filepath.Join(state, "siteops")); !os.IsNotExist(err) {
				t.Errorf("the command made the store's directory (%v)", err)
			}
		})
	}

	// A worker makes the store (and migrates it) before it dials Temporal,
	// which is not there: it waits for Temporal, and the commands open
	// that store meanwhile.
	worker := append([]string{"AGENTSITE_BASE_URL=http://127.0.0.1:1", "AGENTSITE_API_KEY=svc_live_x", "SITEOPS_METRICS_ADDR="}, env...)
	waitingWorker(t, worker)
	if stdout, stderr, code := runBinary(t, t.TempDir(), env, "events", "list"); code != 0 || !strings.Contains(stdout, "empty") {
		t.Errorf("events list on the worker's store: exit %d\n%s%s", code, stdout, stderr)
	}

	t.Run("postgres", func(t *testing.T) {
		u, err := url.Parse(storetest.PostgresSchemaURL(t))
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(u.User.Username(), "pw-not-to-print")
		for _, args := range commands[:2] {
			stdout, stderr, code := runBinary(t, t.TempDir(), append(env, "SITEOPS_DATABASE_URL="+u.String()), args...)
			if code != exitNotFound || !strings.Contains(stderr, "no siteops database at postgres://") || !strings.Contains(stderr, "start the worker") {
				t.Errorf("%v on a database no siteops process migrated: exit %d, stderr %q", args, code, stderr)
			}
			if strings.Contains(stdout+stderr, "pw-not-to-print") {
				t.Errorf("%v printed the database password: %q", args, stdout+stderr)
			}
		}
		if hasGooseTable(t, u.String()) {
			t.Error("a command migrated the database")
		}
	})
}

// hasGooseTable reports whether the PostgreSQL schema at raw has goose's
// version table.
func hasGooseTable(t *testing.T, raw string) bool {
	t.Helper()
	st, err := store.Open(t.Context(), raw, store.Options{NoMigration: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	var n int
	if err := st.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'goose_db_version'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// waitingWorker runs `siteops worker` against a Temporal that is not there
// until it says it waits for it (having made and migrated its store), then
// stops it, and fails the test if it exited on its own.
func waitingWorker(t *testing.T, env []string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), siteopsBinary(t), "worker")
	cmd.Dir = t.TempDir()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var log siteopstest.Log
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(log.String(), "Temporal does not answer; the worker waits for it") {
		select {
		case err := <-exited:
			t.Fatalf("the worker exited without Temporal (%v); it should wait for it:\n%s", err, log.String())
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("the worker did not say within 30 s that it waits for Temporal:\n%s", log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		t.Logf("the waiting worker stopped on SIGTERM (%v)", err)
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Errorf("the waiting worker did not stop within 10 s of SIGTERM")
	}
}
