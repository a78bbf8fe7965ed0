package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ServerVersion is the pinned Temporal server: the Makefile builds
// go.temporal.io/server/cmd/server and cmd/tools/sql at this version into
// .tools/bin/temporal-server and .tools/bin/temporal-sql-tool.
const ServerVersion = "v1.32.2"

// Environment variables that override where the binaries are looked for.
const (
	ServerEnv  = "SITEOPS_TEMPORAL_SERVER"
	SQLToolEnv = "SITEOPS_TEMPORAL_SQL_TOOL"
)

// ErrToolsMissing is returned (wrapped) by Start when the Temporal server, its
// SQL tool or the temporal CLI cannot be found; `make cluster-tools` builds
// the first two, `make tools` the CLI.
var ErrToolsMissing = errors.New("temporal cluster tools missing")

// FindServer locates temporal-server: $SITEOPS_TEMPORAL_SERVER, then
// .tools/bin/temporal-server in this module or a parent directory, then PATH.
func FindServer() (string, error) {
	return findTool(ServerEnv, "temporal-server", "go.temporal.io/server/cmd/server")
}

// FindSQLTool locates temporal-sql-tool like FindServer.
func FindSQLTool() (string, error) {
	return findTool(SQLToolEnv, "temporal-sql-tool", "go.temporal.io/server/cmd/tools/sql")
}

func findTool(env, name, pkg string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil { //nolint:gosec // the binary the user names
			return "", fmt.Errorf("%w: %s=%s: %w", ErrToolsMissing, env, p, err)
		}
		return p, nil
	}
	if p, err := findUp(filepath.Join(".tools", "bin", name)); err == nil {
		return p, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w: %s %s was not found; run `make cluster-tools` (it builds %s@%s into .tools/bin/%s) or set %s",
		ErrToolsMissing, name, ServerVersion, pkg, ServerVersion, name, env)
}

// findUp returns the absolute path of rel in the working directory or the
// nearest parent directory that has it.
func findUp(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		p := filepath.Join(d, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s not found in %s or a parent directory", rel, dir)
		}
	}
}

// findDeployFiles locates the cluster's server configuration root (the
// directory holding config/cluster.yaml and dynamicconfig/cluster.yaml) and
// the namespace setup script in this module's deploy/ directory.
func findDeployFiles() (configRoot, setupScript string, err error) {
	cfg, err := findUp(filepath.Join("deploy", "temporal", "config", "cluster.yaml"))
	if err != nil {
		return "", "", fmt.Errorf("%w; run from the siteops module (it keeps deploy/temporal)", err)
	}
	script, err := findUp(filepath.Join("deploy", "temporal-setup.sh"))
	if err != nil {
		return "", "", fmt.Errorf("%w; run from the siteops module", err)
	}
	return filepath.Dir(filepath.Dir(cfg)), script, nil
}
