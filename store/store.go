package store

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the pgx driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	_ "modernc.org/sqlite" // registers the sqlite driver
)

//go:embed migrations
var migrations embed.FS

// Dialect names the database behind a Store.
type Dialect string

// The supported databases.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// ErrNotFound is returned when a looked-up row does not exist.
var ErrNotFound = errors.New("store: not found")

// ErrNoSecretKey is returned when a signing secret must be stored or read
// and the store was opened without an encryption key.
var ErrNoSecretKey = errors.New("store: SITEOPS_SECRET_KEY is not set, so signing secrets cannot be stored; make one with `openssl rand -base64 32` (or `head -c 32 /dev/urandom | base64`) and set it for the worker and the ingress")

// Store is the siteops database.
type Store struct {
	db      *sql.DB
	dialect Dialect
	aead    cipher.AEAD
	now     func() time.Time
}

// Option configures Open.
type Option func(*Store) error

// WithSecretKey sets the 32-byte AES-256-GCM key that encrypts signing
// secrets at rest.
func WithSecretKey(key []byte) Option {
	return func(s *Store) error {
		if len(key) != 32 {
			return fmt.Errorf("store: the secret key is %d bytes; SITEOPS_SECRET_KEY must be 32 bytes, base64-encoded (openssl rand -base64 32)", len(key))
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return err
		}
		s.aead = aead
		return nil
	}
}

// WithClock sets the clock that stamps rows (time.Now otherwise).
func WithClock(now func() time.Time) Option {
	return func(s *Store) error {
		s.now = now
		return nil
	}
}

// Open connects to the database named by rawURL — sqlite://PATH (relative
// or, with three slashes, absolute) or postgres://... — and migrates it to
// the latest schema.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Store, error) {
	dialect, dsn, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	s := &Store{dialect: dialect, now: time.Now}
	for _, opt := range opts {
		if err := opt(s); err != nil {
			return nil, err
		}
	}
	driver := "pgx"
	if dialect == SQLite {
		driver = "sqlite"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("store: opening %s: %w", redact(rawURL), err)
	}
	if dialect == SQLite {
		// One writer at a time is SQLite's model; a single connection
		// avoids SQLITE_BUSY between our own goroutines.
		db.SetMaxOpenConns(1)
	} else {
		db.SetMaxOpenConns(20)
		db.SetConnMaxIdleTime(5 * time.Minute)
	}
	s.db = db
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: cannot reach %s: %w; check SITEOPS_DATABASE_URL", redact(rawURL), err)
	}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

func parseURL(raw string) (Dialect, string, error) {
	switch {
	case strings.HasPrefix(raw, "sqlite://"):
		path := strings.TrimPrefix(raw, "sqlite://")
		if path == "" {
			return "", "", errors.New("store: sqlite:// needs a file path, e.g. sqlite://siteops.db")
		}
		query := ""
		if p, q, found := strings.Cut(path, "?"); found {
			path, query = p, "&"+q
		}
		return SQLite, "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate" + query, nil
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		if _, err := url.Parse(raw); err != nil {
			return "", "", fmt.Errorf("store: %s is not a valid URL", redact(raw))
		}
		return Postgres, raw, nil
	}
	return "", "", fmt.Errorf("store: SITEOPS_DATABASE_URL %q must start with sqlite:// or postgres://", redact(raw))
}

// redact hides a password in a database URL.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		return u.Redacted()
	}
	return raw
}

func (s *Store) migrate(ctx context.Context) error {
	sub, err := fs.Sub(migrations, "migrations/"+string(s.dialect))
	if err != nil {
		return err
	}
	opts := []goose.ProviderOption{}
	gooseDialect := goose.DialectSQLite3
	if s.dialect == Postgres {
		gooseDialect = goose.DialectPostgres
		// Several replicas may start at once: one migrates, the others wait.
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(gooseDialect, s.db, sub, opts...)
	if err != nil {
		return fmt.Errorf("store: loading migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("store: migrating: %w", err)
	}
	return nil
}

// Dialect reports which database the store uses.
func (s *Store) Dialect() Dialect { return s.dialect }

// DB exposes the handle for packages that keep their own tables here.
func (s *Store) DB() *sql.DB { return s.db }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// placeholders returns "($1,$2,...),(...)" for rows of n columns starting at
// argument 1. Both SQLite and PostgreSQL read $N.
func placeholders(rows, cols int) string {
	var b strings.Builder
	arg := 1
	for r := range rows {
		if r > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		for c := range cols {
			if c > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "$%d", arg)
			arg++
		}
		b.WriteByte(')')
	}
	return b.String()
}
