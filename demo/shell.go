package demo

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/siteops/siteops/internal/devserver"
)

// ShellHeader is the line that --keep prints before the lines to paste:
// everything after it up to the first empty line is the block.
const ShellHeader = "to use it from another shell, paste these lines into it (bash or zsh):"

// unsetFirst are the variables a shell may hold that would take siteops,
// temporal or curl elsewhere, or clash with the files the block names (a
// variable set beside its _FILE twin stops every siteops command): the
// block unsets them before it exports its own.
var unsetFirst = []string{
	"SITEOPS_SECRET_KEY", "AGENTSITE_API_KEY", "SITEOPS_DATABASE_URL_FILE",
	"SITEOPS_PAYLOAD_KEY", "SITEOPS_PAYLOAD_KEY_FILE",
	"TEMPORAL_PROFILE", "TEMPORAL_API_KEY", "TEMPORAL_API_KEY_FILE", "TEMPORAL_TLS",
}

// shell writes the demo's secrets into files in its directory (readable by
// its owner only) and returns the lines that point a shell at this demo:
// every setting the CLI, the temporal CLI and the commands in docs/ read.
// The lines name the files, never a key's or a token's value.
func (d *run) shell() ([]string, error) {
	secretKey, err := d.writeSecretFile("secret-key", base64.StdEncoding.EncodeToString(d.secretKey))
	if err != nil {
		return nil, err
	}
	apiKeyFile, err := d.writeSecretFile("agentsite-api-key", apiKey)
	if err != nil {
		return nil, err
	}
	adminTokenFile, err := d.writeSecretFile("sim-admin-token", adminToken)
	if err != nil {
		return nil, err
	}
	var payloadKeyFile string
	if d.payloadKey != "" {
		if payloadKeyFile, err = d.writeSecretFile("payload-key", d.payloadKey); err != nil {
			return nil, err
		}
	}

	unset := unsetFirst
	if payloadKeyFile != "" {
		unset = slices.DeleteFunc(slices.Clone(unset), func(v string) bool { return v == "SITEOPS_PAYLOAD_KEY_FILE" })
	}
	lines := []string{"unset " + strings.Join(unset, " ")}
	if path := d.binPath(); path != "" {
		lines = append(lines, "export PATH="+path+`:"$PATH"`)
	}
	export := func(name, value string) { lines = append(lines, "export "+name+"="+shellQuote(value)) }
	export("TEMPORAL_ADDRESS", d.temporal.Address)
	export("TEMPORAL_NAMESPACE", namespace)
	export("SITEOPS_TASK_QUEUE", taskQueue)
	export("TEMPORAL_HTTP_ADDRESS", d.temporal.HTTPAddress)
	export("SITEOPS_ENDPOINT", d.endpointID)
	export("SITEOPS_DATABASE_URL", d.dbURL)
	export("SITEOPS_SECRET_KEY_FILE", secretKey)
	if payloadKeyFile != "" {
		export("SITEOPS_PAYLOAD_KEY_FILE", payloadKeyFile)
	}
	export("SITEOPS_PUBLIC_URL", d.ingressURL+"/webhooks")
	export("SITEOPS_ALLOW_LOOPBACK_RECEIVERS", "true")
	export("AGENTSITE_BASE_URL", d.simURL)
	export("AGENTSITE_API_KEY_FILE", apiKeyFile)
	// The simulator reads its admin token from this variable, and curl
	// sends it; it has no _FILE form, so the shell reads the file.
	lines = append(lines, `export SITEOPS_SIM_ADMIN_TOKEN="$(cat `+shellQuote(adminTokenFile)+`)"`)
	export("SITEOPS_INGRESS_ADDR", strings.TrimPrefix(d.ingressURL, "http://"))
	export("SITEOPS_INGRESS_ADMIN_ADDR", strings.TrimPrefix(d.adminURL, "http://"))
	return lines, nil
}

// binPath is the directories of this siteops and of the temporal CLI the
// demo runs, quoted for a shell and joined as PATH joins them, so that
// `siteops` and `temporal` in the pasted shell are the demo's own.
func (d *run) binPath() string {
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	if cli, err := devserver.FindCLI(); err == nil {
		if abs, err := filepath.Abs(cli); err == nil {
			dirs = append(dirs, filepath.Dir(abs))
		}
	}
	var quoted []string
	for _, dir := range slices.Compact(dirs) {
		quoted = append(quoted, shellQuote(dir))
	}
	return strings.Join(quoted, ":")
}

// writeSecretFile writes value and a newline to name in the demo's
// directory, readable and writable by its owner only, and returns its
// path. A file an earlier run left in the same directory is replaced, so
// that its mode is never wider.
func (d *run) writeSecretFile(name, value string) (string, error) {
	path := filepath.Join(d.o.Dir, name)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) //nolint:gosec // a path in the demo's own directory
	if err != nil {
		return "", err
	}
	if _, err := fmt.Fprintln(f, value); err != nil {
		_ = f.Close()
		return "", err
	}
	return path, f.Close()
}

// shellQuote quotes s for bash and zsh: in single quotes, a single quote
// within it closing the quotes, escaped with a backslash, and opening them
// again.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
