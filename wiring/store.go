package wiring

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/doctor"
	"github.com/siteops/siteops/ingress"
	"github.com/siteops/siteops/store"
)

// ErrNoStore marks a database that does not exist yet: nothing has created
// it, because only the worker and the ingress (and the demo, for its own)
// create and migrate it.
var ErrNoStore = errors.New("no siteops database")

// startToMigrate is the fix for a missing or unmigrated database.
const startToMigrate = "start the worker (`siteops worker`) or the ingress, which create and migrate it at start, or set SITEOPS_DATABASE_URL to the database they use"

// OpenStore opens and migrates the store that d names, creating it when
// it does not exist, with the key that encrypts signing secrets when
// SITEOPS_SECRET_KEY is set. Only the processes that own the store call
// it (the worker, the ingress, the demo); commands use OpenExistingStore. With no
// SITEOPS_DATABASE_URL it is the per-user SQLite file, whose directory it
// creates. It returns the URL it opened (a password in it redacted), for
// the process to say where its state is.
func OpenStore(ctx context.Context, d config.Database) (*store.Store, string, error) {
	url, key, err := storeSettings(d)
	if err != nil {
		return nil, "", err
	}
	if path, ok := sqlitePath(url); ok {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, "", fmt.Errorf("creating the directory of the store %s: %w; set SITEOPS_DATABASE_URL", path, err)
		}
	}
	st, err := store.Open(ctx, url, store.Options{SecretKey: key, MaxConns: d.MaxConns})
	if err != nil {
		return nil, "", err
	}
	return st, store.Redact(url), nil
}

// OpenExistingStore opens the store that d names for reading and writing,
// for the commands that work on what the worker and the ingress keep
// there (events, secret retire and rekey, onboarding's knowledge texts):
// it creates no directory, no file and no schema, and applies no
// migration. A SQLite file that does not exist (or is empty), or a
// database that no siteops process ever migrated, is ErrNoStore with the
// fix; one behind this build's schema is doctor.ErrNotMigrated. It
// returns the URL it opened, a password in it redacted.
func OpenExistingStore(ctx context.Context, d config.Database) (*store.Store, string, error) {
	// SQLite's default mode creates a missing file; rw refuses to, should
	// it go between the look and the open.
	st, where, err := openAsIs(ctx, d, "mode=rw", "")
	if err != nil {
		return nil, where, err
	}
	version, pending, err := st.PendingMigrations(ctx)
	switch {
	case err != nil:
		err = fmt.Errorf("%s: %w", where, err)
	case version == 0 && pending > 0:
		err = fmt.Errorf("%w at %s (it holds no siteops schema): %s", ErrNoStore, where, startToMigrate)
	case pending > 0:
		err = fmt.Errorf("the store %s is at schema version %d with %d migration(s) of this build not applied: start the worker (`siteops worker`) or the ingress of this build, which migrate it at start: %w",
			where, version, pending, doctor.ErrNotMigrated)
	}
	if err != nil {
		_ = st.Close()
		return nil, where, err
	}
	return st, where, nil
}

// OpenExistingStoreFromEnv is OpenExistingStore of the store the
// environment names (SITEOPS_DATABASE_URL, SITEOPS_SECRET_KEY).
func OpenExistingStoreFromEnv(ctx context.Context) (*store.Store, error) {
	var d config.Database
	if err := config.Load(&d); err != nil {
		return nil, err
	}
	st, _, err := OpenExistingStore(ctx, d)
	return st, err
}

// InspectStoreFromEnv is InspectStore of the store the environment names
// (SITEOPS_DATABASE_URL, SITEOPS_SECRET_KEY).
func InspectStoreFromEnv(ctx context.Context) (*store.Store, string, error) {
	var d config.Database
	if err := config.Load(&d); err != nil {
		return nil, "", err
	}
	return InspectStore(ctx, d)
}

// OldSecretKeyEnv holds the previous SITEOPS_SECRET_KEY, for `siteops
// secret rekey`.
const OldSecretKeyEnv = "SITEOPS_OLD_SECRET_KEY" //nolint:gosec // the name of a variable, not a credential

// OldSecretKeyFromEnv is the previous SITEOPS_SECRET_KEY
// (OldSecretKeyEnv), nil when it is not set.
func OldSecretKeyFromEnv() ([]byte, error) {
	raw := os.Getenv(OldSecretKeyEnv)
	if raw == "" {
		return nil, nil
	}
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(raw))
	if err != nil || len(k) != 32 {
		return nil, config.Invalid("%s must be 32 bytes in base64, like SITEOPS_SECRET_KEY", OldSecretKeyEnv)
	}
	return k, nil
}

// ReceiverSecretsFromEnv are the active secrets stored for an ingress
// receiver (ingress.StoredCaptureSecrets) in the store the
// environment names, opened as it is and read-only (InspectStore): a check
// creates no database and migrates none. They are encrypted with
// SITEOPS_SECRET_KEY: without it there is a setting to give.
func ReceiverSecretsFromEnv(ctx context.Context, receiver string) (ingress.CaptureSecrets, error) {
	var d config.Database
	if err := config.Load(&d); err != nil {
		return ingress.CaptureSecrets{}, err
	}
	if d.SecretKey == "" {
		return ingress.CaptureSecrets{}, config.Invalid("SITEOPS_SECRET_KEY is not set, and the secrets stored for receiver %s are encrypted with it: set it to the key the worker and the ingress use, or verify with SITEOPS_WEBHOOK_SECRETS instead of --receiver",
			store.ReceiverName(receiver))
	}
	st, _, err := InspectStore(ctx, d)
	if err != nil {
		return ingress.CaptureSecrets{}, err
	}
	defer func() { _ = st.Close() }()
	return ingress.StoredCaptureSecrets(ctx, st, receiver)
}

// InspectStore opens the store that d names as it is and read-only, for
// commands that must change nothing (doctor, signature verify): it creates
// no directory and no file and applies no migration. A SQLite file that
// does not exist (or is empty) is ErrNoStore, with the fix. SQLite may
// still create the -wal and -shm files a reader of a WAL database needs.
func InspectStore(ctx context.Context, d config.Database) (*store.Store, string, error) {
	return openAsIs(ctx, d, "mode=ro", "default_transaction_read_only=on")
}

// openAsIs opens the store that d names without creating or migrating
// anything, adding sqliteParam or postgresParam (when not empty) to its
// URL. A SQLite file that does not exist (or is empty) is ErrNoStore. It
// returns the URL as messages name it, a password redacted.
func openAsIs(ctx context.Context, d config.Database, sqliteParam, postgresParam string) (*store.Store, string, error) {
	url, key, err := storeSettings(d)
	if err != nil {
		return nil, "", err
	}
	where := store.Redact(url)
	param := postgresParam
	if path, ok := sqlitePath(url); ok {
		if err := sqliteExists(path, where); err != nil {
			return nil, where, err
		}
		param = sqliteParam
	}
	if param != "" {
		url = withQuery(url, param)
	}
	st, err := store.Open(ctx, url, store.Options{SecretKey: key, NoMigration: true})
	if err != nil {
		return nil, where, err
	}
	return st, where, nil
}

// sqliteExists says, as ErrNoStore with the fix, when the SQLite file at
// path (where, as messages name it) does not exist or is empty.
func sqliteExists(path, where string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w at %s: %s", ErrNoStore, where, startToMigrate)
	case err != nil:
		return fmt.Errorf("the store %s cannot be read (%w); check SITEOPS_DATABASE_URL: %w", where, err, store.ErrUnreachable)
	case fi.Size() == 0:
		return fmt.Errorf("%w at %s (the file is empty): %s", ErrNoStore, where, startToMigrate)
	}
	return nil
}

// withQuery adds a query parameter to a database URL.
func withQuery(url, param string) string {
	if strings.Contains(url, "?") {
		return url + "&" + param
	}
	return url + "?" + param
}

// StoreURL is the store d names, as a process says where its state is: the
// per-user SQLite file when SITEOPS_DATABASE_URL is unset, a relative path
// made absolute, a password redacted.
func StoreURL(d config.Database) (string, error) {
	url, err := d.ResolvedURL()
	if err != nil {
		return "", err
	}
	return store.Redact(url), nil
}

// storeSettings checks the database settings before anything is opened.
func storeSettings(d config.Database) (url string, key []byte, err error) {
	if d.MaxConns != 0 && (d.MaxConns < config.MinMaxConns || d.MaxConns > config.MaxMaxConns) {
		return "", nil, config.Invalid("SITEOPS_DATABASE_MAX_CONNS=%d: it must be from %d to %d (the default is %d)", d.MaxConns, config.MinMaxConns, config.MaxMaxConns, store.DefaultMaxConns)
	}
	if url, err = d.ResolvedURL(); err != nil {
		return "", nil, err
	}
	if key, err = d.Key(); err != nil {
		return "", nil, err
	}
	return url, key, nil
}

// sqlitePath is the file of a sqlite:// URL.
func sqlitePath(url string) (string, bool) {
	path, ok := strings.CutPrefix(url, "sqlite://")
	if !ok {
		return "", false
	}
	path, _, _ = strings.Cut(path, "?")
	return path, true
}
