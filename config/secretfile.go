package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// SecretVariables are the settings whose values are secrets (or, for
// SITEOPS_DATABASE_URL, hold one: the password). Each may instead be given
// as a file: NAME_FILE names a file whose content is the value, so that a
// deployment mounts secrets as files (Kubernetes Secret volumes, compose
// secrets) instead of writing them into the process environment of its
// manifests. LoadSecretFiles reads them.
var SecretVariables = []string{
	"AGENTSITE_API_KEY",
	"SITEOPS_SECRET_KEY",
	"SITEOPS_OLD_SECRET_KEY",
	"SITEOPS_PAYLOAD_KEY",
	"SITEOPS_WEBHOOK_SECRETS",
	"SITEOPS_CODEC_TOKEN",
	"TEMPORAL_API_KEY",
	"SITEOPS_DATABASE_URL",
}

// FileSuffix turns a variable of SecretVariables into the one naming its
// file: SITEOPS_SECRET_KEY_FILE.
const FileSuffix = "_FILE"

// maxSecretFile bounds what LoadSecretFiles reads from one file: a secret
// is a line, and a mistaken path (a device, a log) must not be read whole.
const maxSecretFile = 64 << 10

// LoadSecretFiles turns every NAME_FILE of SecretVariables that is set into
// NAME: it reads the file, removes its trailing newlines and sets NAME in
// the process environment, then unsets NAME_FILE. Every later reader of the
// environment — envconfig, the Temporal SDK's own loader (TEMPORAL_API_KEY),
// the commands, a child process — sees the value as if it had been set
// directly, and a child never sees both. cmd/siteops calls it once, first.
//
// An empty variable counts as unset here; an empty file gives an empty
// value, which is unset too. Setting both NAME and NAME_FILE is an error
// naming both; a file that cannot be read is an error naming the variable
// and the path, never the content. Every problem is reported at once; each
// error matches ErrInvalid.
func LoadSecretFiles() error {
	var errs []error
	for _, name := range SecretVariables {
		if err := loadSecretFile(name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func loadSecretFile(name string) error {
	fileVar := name + FileSuffix
	path, ok := os.LookupEnv(fileVar)
	if !ok {
		return nil
	}
	if path == "" {
		return unsetenv(fileVar)
	}
	if v, set := os.LookupEnv(name); set && v != "" {
		return Invalid("%s and %s are both set; set only one of them (%s names a file holding the value)", name, fileVar, fileVar)
	}
	value, err := readSecretFile(path)
	if err != nil {
		return Invalid("%s=%s: %v; make the file readable by this process or unset %s", fileVar, path, err, fileVar)
	}
	if err := os.Setenv(name, value); err != nil {
		// os.Setenv refuses a NUL byte; its error does not hold the value.
		return Invalid("%s=%s: its content cannot be the value of %s (%v); the file must hold the value alone", fileVar, path, name, err)
	}
	return unsetenv(fileVar)
}

// readSecretFile returns the content of path without its trailing newlines.
// Its errors name the problem, not the path (the caller does) nor the content.
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path) //nolint:gosec // the operator names the file; reading it is the point
	if err != nil {
		return "", cause(err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", cause(err)
	}
	if len(b) > maxSecretFile {
		return "", fmt.Errorf("it holds more than %d KiB; a secret file holds only the value", maxSecretFile>>10)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// cause is the reason of a file error without the path, which the caller
// names once.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("cannot read it: %w", pe.Err)
	}
	return fmt.Errorf("cannot read it: %w", err)
}

func unsetenv(name string) error {
	if err := os.Unsetenv(name); err != nil {
		return Invalid("cannot unset %s: %v", name, err)
	}
	return nil
}
