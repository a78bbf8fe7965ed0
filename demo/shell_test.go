package demo

import (
	"os/exec"
	"testing"
)

// TestShellQuote pastes quoted values into bash, which must read them
// back unchanged: quotes, dollars, spaces and backslashes included.
func TestShellQuote(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("SKIP: no bash")
	}
	for _, v := range []string{"", "/tmp/siteops-demo-1", "it's", `a "b" $HOME \n`, "'''", "sqlite:///tmp/x y/siteops.db"} {
		out, err := exec.Command(bash, "--norc", "-c", "export V="+shellQuote(v)+`; printf %s "$V"`).Output() //nolint:gosec // quoted test values
		if err != nil || string(out) != v {
			t.Errorf("bash read %s as %q (%v), want %q", shellQuote(v), out, err, v)
		}
	}
}
