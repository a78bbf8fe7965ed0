package e2e

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/store/storetest"
)

// run runs the built binary with extra environment variables and returns
// its standard output and error together, and its exit code.
func (e *env) run(t *testing.T, extra []string, args ...string) (string, int) {
	t.Helper()
	out, errOut, code := e.runSplit(t, extra, "", args...)
	return out + errOut, code
}

// runSplit runs the binary with stdin and returns its standard output and
// standard error apart, and its exit code.
func (e *env) runSplit(t *testing.T, extra []string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(e.cliEnv(), extra...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, eo strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &eo
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("running siteops %v: %v", args, err)
	}
	return o.String(), eo.String(), code
}

// testSecretKey is SITEOPS_SECRET_KEY for the stores the tests open.
func testSecretKey() string { return base64.StdEncoding.EncodeToString(storetest.TestKey) }

func itoa(n int) string { return strconv.Itoa(n) }

func listen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
