package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs the root command with args and returns what it printed.
func runCLI(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := newCLI().root()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

func TestHelpListsSubcommands(t *testing.T) {
	out, err := runCLI(t, "", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"version", "signature"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help does not list %s:\n%s", want, out)
		}
	}
}

func TestSignatureSignThenVerify(t *testing.T) {
	body := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(body, []byte(`{"id":"evt_1","type":"lead.created"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(secretsEnv, "whsec_cli_one")
	header, err := runCLI(t, "", "signature", "sign", "--body", body)
	if err != nil {
		t.Fatal(err)
	}
	header = strings.TrimSpace(header)
	if !strings.HasPrefix(header, "t=") || !strings.Contains(header, ",v1=") {
		t.Fatalf("sign printed %q", header)
	}
	if strings.Contains(header, "whsec_cli_one") {
		t.Fatalf("sign printed the secret")
	}

	t.Setenv(secretsEnv, "whsec_other, whsec_cli_one")
	out, err := runCLI(t, "", "signature", "verify", "--body", body, "--header", header)
	if err != nil || !strings.Contains(out, "secret 2 of 2") {
		t.Fatalf("verify = %q, %v; want a match on secret 2", out, err)
	}
	if strings.Contains(out, "whsec_") {
		t.Errorf("verify printed a secret: %s", out)
	}

	t.Setenv(secretsEnv, "whsec_wrong")
	if _, err := runCLI(t, "", "signature", "verify", "--body", "-", "--header", header); err == nil || !strings.Contains(err.Error(), "no valid signature") {
		t.Fatalf("verify with the wrong secret: %v", err)
	}
	t.Setenv(secretsEnv, "")
	if _, err := runCLI(t, "", "signature", "sign", "--body", body); err == nil || !strings.Contains(err.Error(), secretsEnv) {
		t.Fatalf("sign without secrets: %v", err)
	}
}

// TestUnknownFlagSuggests checks that a mistyped flag is a usage error that
// names the flags it probably meant, inherited ones included, and points
// to --help when nothing is near.
func TestUnknownFlagSuggests(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"onboard", "--dryrun"}, "unknown flag: --dryrun; did you mean --dry-run?"},
		{[]string{"onboard", "--wiat"}, "did you mean --wait?"},
		{[]string{"status", "onboarding/x", "--outptu", "json"}, "did you mean --output?"},
		{[]string{"leads", "sync", "--ful"}, "did you mean --full?"},
		{[]string{"embed", "off", "--zzzzzzzz"}, "unknown flag: --zzzzzzzz (see siteops embed off --help)"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := runCLI(t, "", tc.args...)
			if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("siteops %s = %v; want a usage error saying %q", strings.Join(tc.args, " "), err, tc.want)
			}
		})
	}
}

// TestUnknownSubcommandSuggests checks that a mistyped subcommand is a
// usage error that names what it probably meant (a swap of two letters, a
// letter left out, a beginning; the completion command too, which the
// README documents), and lists the choices when nothing is near, also
// when a flag follows the mistyped word.
func TestUnknownSubcommandSuggests(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"leads", "snyc"}, "did you mean sync?"},
		{[]string{"stauts"}, "did you mean status?"},
		{[]string{"embed", "of"}, "did you mean off or on?"},
		{[]string{"secret", "rotat"}, "did you mean rotate?"},
		{[]string{"events", "zzzzzz"}, "choose one of: list, replay, show"},
		{[]string{"complet"}, "did you mean completion?"},
		{[]string{"embed", "of", "--site", "x"}, `unknown command "of" for siteops embed; did you mean off or on?`},
		{[]string{"secret", "rotat", "--endpoint", "we_1", "--url", "https://x"}, "did you mean rotate?"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := runCLI(t, "", tc.args...)
			if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("siteops %s = %v; want a usage error saying %q", strings.Join(tc.args, " "), err, tc.want)
			}
		})
	}
}
