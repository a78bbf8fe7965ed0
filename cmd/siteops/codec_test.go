package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/wiring"
)

// TestCodecServerRefusesBadSettings checks that codec-server stops before
// listening when its settings cannot make a safe server.
func TestCodecServerRefusesBadSettings(t *testing.T) {
	t.Setenv("SITEOPS_PAYLOAD_KEY", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	t.Setenv(wiring.CodecTokenEnv, "short")
	if _, err := runCLI(t, "", "codec-server", "--addr", "127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("a short token: %v, want a refusal naming the minimum length", err)
	}
	t.Setenv(wiring.CodecTokenEnv, "codec-token-from-env-0123")
	if _, err := runCLI(t, "", "codec-server", "--addr", "127.0.0.1:0", "--token-file", filepath.Join(t.TempDir(), "t")); err == nil || !strings.Contains(err.Error(), "use one") {
		t.Errorf("a token in both places: %v", err)
	}
	if _, err := runCLI(t, "", "codec-server", "--addr", "127.0.0.1:0", "--require-encrypted", "--allow-plaintext"); err == nil || !strings.Contains(err.Error(), "contradict") {
		t.Errorf("--require-encrypted with --allow-plaintext: %v, want a refusal", err)
	}
}

// TestCodecServerRefusesToListenBeyondLoopbackWithoutAToken checks that
// codec-server without a token stops, in one line naming the fixes,
// before it serves on an address other machines reach — its Host list
// stops browsers only — while on loopback, as the demo runs it, it serves.
// The command runs under a deadline, so a server that starts instead is
// stopped and the test fails rather than hangs.
func TestCodecServerRefusesToListenBeyondLoopbackWithoutAToken(t *testing.T) {
	t.Setenv("SITEOPS_PAYLOAD_KEY", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	t.Setenv(wiring.CodecTokenEnv, "")
	_ = os.Unsetenv(wiring.CodecTokenEnv)
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		out, err := runCLIWithin(t, 10*time.Second, "codec-server", "--addr", addr)
		if err == nil || exitCode(err) != exitUsage {
			t.Fatalf("codec-server --addr %s without a token = %v (printed %q); want a refusal, exit %d", addr, err, out, exitUsage)
		}
		for _, want := range []string{wiring.CodecTokenEnv, "--token-file", "127.0.0.1"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal %q does not name %s", err, want)
			}
		}
		if strings.Contains(err.Error(), "\n") || out != "" {
			t.Errorf("the refusal is %q and printed %q; want one line and nothing served", err, out)
		}
	}
	// On loopback it starts; the deadline then stops it.
	if out, err := runCLIWithin(t, time.Second, "codec-server", "--addr", "127.0.0.1:0"); err != nil || !strings.Contains(out, "codec server for key") {
		t.Errorf("codec-server on loopback without a token = %v, printed %q; want it to serve", err, out)
	}
	// With a token it serves beyond loopback too.
	t.Setenv(wiring.CodecTokenEnv, "codec-token-from-env-0123")
	if out, err := runCLIWithin(t, time.Second, "codec-server", "--addr", "0.0.0.0:0"); err != nil || !strings.Contains(out, "bearer token required") {
		t.Errorf("codec-server beyond loopback with a token = %v, printed %q; want it to serve", err, out)
	}
}

// TestCodecServerKeyRingSetting checks that codec-server takes a key ring
// in SITEOPS_PAYLOAD_KEY, says which key encrypts, and refuses a bad ring
// naming the key's place, never its value.
func TestCodecServerKeyRingSetting(t *testing.T) {
	const keyA, keyB = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", "YmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmI="
	t.Setenv("SITEOPS_PAYLOAD_KEY", keyB+","+keyA)
	out, err := runCLIWithin(t, time.Second, "codec-server", "--addr", "127.0.0.1:0")
	if err != nil || !strings.Contains(out, "codec server for keys ") || !strings.Contains(out, " (encrypts), ") {
		t.Errorf("codec-server with the ring B,A = %v, printed %q; want it to name both keys, the first encrypting", err, out)
	}
	t.Setenv("SITEOPS_PAYLOAD_KEY", keyB+",not-a-key")
	_, err = runCLIWithin(t, 10*time.Second, "codec-server", "--addr", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "key 2") || exitCode(err) != exitUsage || strings.Contains(err.Error(), keyB) {
		t.Errorf("codec-server with a bad second key = %v; want exit %d naming key 2 and not showing a key", err, exitUsage)
	}
}

// runCLIWithin runs the CLI as runCLI does, stopping it after d as Ctrl-C
// would (a server stops cleanly then).
func runCLIWithin(t *testing.T, d time.Duration, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	root := newCLI().root()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}
