package deploy_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite/webhook"
)

// TestBinaryReadsSecretFiles runs the siteops binary as the deployments do,
// with a secret given as a file (SITEOPS_WEBHOOK_SECRETS_FILE, a mounted
// secret with a trailing newline): `siteops signature sign` signs with the
// file's content, so the value reached the command that reads the
// variable; with the variable set as well, the process stops at once with
// exit 2 naming both, and never shows the secret.
func TestBinaryReadsSecretFiles(t *testing.T) {
	const secret = "whsec_from-a-mounted-file"
	dir := t.TempDir()
	body := filepath.Join(dir, "body.json")
	secretFile := filepath.Join(dir, "SITEOPS_WEBHOOK_SECRETS")
	if err := os.WriteFile(body, []byte(`{"id":"evt_1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	run := func(env ...string) (string, int) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), binary, "signature", "sign", "--body", body, "--time", "1700000000") //nolint:gosec // the binary this package built
		cmd.Env = append(os.Environ(), append([]string{"SITEOPS_WEBHOOK_SECRETS=", "SITEOPS_WEBHOOK_SECRETS_FILE="}, env...)...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return string(out), exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}

	want := webhook.Sign(secret, time.Unix(1700000000, 0), []byte(`{"id":"evt_1"}`))
	if out, code := run("SITEOPS_WEBHOOK_SECRETS_FILE=" + secretFile); code != 0 || strings.TrimSpace(out) != want {
		t.Errorf("signature sign with SITEOPS_WEBHOOK_SECRETS_FILE: exit %d, %q; want 0 and %q (signed with the file's content)", code, out, want)
	}
	out, code := run("SITEOPS_WEBHOOK_SECRETS="+secret, "SITEOPS_WEBHOOK_SECRETS_FILE="+secretFile)
	if code != 2 || !strings.Contains(out, "SITEOPS_WEBHOOK_SECRETS and SITEOPS_WEBHOOK_SECRETS_FILE are both set") || strings.Contains(out, secret) {
		t.Errorf("both set: exit %d, %q; want 2 naming both, without the secret", code, out)
	}
	missing := filepath.Join(dir, "absent")
	out, code = run("SITEOPS_WEBHOOK_SECRETS_FILE=" + missing)
	if code != 2 || !strings.Contains(out, "SITEOPS_WEBHOOK_SECRETS_FILE="+missing) {
		t.Errorf("a missing file: exit %d, %q; want 2 naming the variable and the path", code, out)
	}
}
