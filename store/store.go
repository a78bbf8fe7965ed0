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
	"slices"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the pgx driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
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

// ErrBadURL is returned when SITEOPS_DATABASE_URL cannot name a store.
var ErrBadURL = errors.New("store: bad database URL")

// ErrUnreachable matches errors.Is for a database that cannot be reached.
var ErrUnreachable = errors.New("store: database unreachable")

// unreachableError says why the database could not be reached and matches
// ErrUnreachable.
type unreachableError struct{ msg string }

func (e unreachableError) Error() string        { return e.msg }
func (e unreachableError) Is(target error) bool { return target == ErrUnreachable }

// ErrNoSecretKey is returned when a signing secret must be stored or read
// and the store was opened without an encryption key. Its own message
// never advises making a key, which would open none of the secrets
// already stored: Store.NoKeyError, which matches it, says which key
// sealed them, or how to make one when nothing is stored.
var ErrNoSecretKey = errors.New("store: SITEOPS_SECRET_KEY is not set, and signing secrets are sealed with it: set it (or SITEOPS_SECRET_KEY_FILE) to the key the worker and the ingress run with")

// Store is the siteops database.
type Store struct {
	db       *sql.DB
	dialect  Dialect
	path     string      // the SQLite file; "" for PostgreSQL
	aead     cipher.AEAD // the raw key: the first format of stored secrets
	keys     *secretKeys // keys derived from it (secretkeys.go)
	now      func() time.Time
	maxConns int             // PostgreSQL: the pool's size (Options.MaxConns)
	group    *groupCommitter // PostgreSQL: RecordEvent calls share commits
}

// DefaultMaxConns is the size of a process's pool of PostgreSQL
// connections when SITEOPS_DATABASE_MAX_CONNS does not say.
const DefaultMaxConns = 20

// Options configures Open. The zero value opens a migrated store without
// a secret key, with time.Now and DefaultMaxConns.
type Options struct {
	// SecretKey is the 32-byte AES-256-GCM key that encrypts signing
	// secrets at rest; nil (or empty) opens the store without one.
	SecretKey []byte
	// Clock stamps rows (time.Now when nil).
	Clock func() time.Time
	// MaxConns is how many PostgreSQL connections the store opens at most
	// (DefaultMaxConns when zero or less); SQLite always has one.
	MaxConns int
	// NoMigration opens the store as it is, for checks that must not
	// change it; PendingMigrations says what Open would apply.
	NoMigration bool
	// NoGroupCommit makes RecordEvent on PostgreSQL commit each event in
	// a transaction of its own, as a plain INSERT per delivery would: the
	// baseline that does the inbox's durable work without sharing commits,
	// which the benchmarks measure the group commit against. No process of
	// siteops opens its store this way.
	NoGroupCommit bool
}

// withDefaults returns o with the clock time.Now and the pool's size
// DefaultMaxConns (which only PostgreSQL reads) where it left them unset.
func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	return o
}

// MaxConns is the most connections the store opens: its pool's size on
// PostgreSQL, 1 on SQLite.
func (s *Store) MaxConns() int {
	if s.dialect == SQLite {
		return 1
	}
	return s.maxConns
}

// secretCipher makes the cipher of a secret key and the keys derived from
// it.
func secretCipher(key []byte) (cipher.AEAD, *secretKeys, error) {
	if len(key) != 32 {
		return nil, nil, fmt.Errorf("store: the secret key is %d bytes; SITEOPS_SECRET_KEY must be 32 bytes, base64-encoded (openssl rand -base64 32)", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, nil, err
	}
	keys, err := newSecretKeys(key)
	if err != nil {
		return nil, nil, err
	}
	return aead, keys, nil
}

// Open connects to the database named by rawURL — sqlite://PATH (relative
// or, with three slashes, absolute) or postgres://... — and migrates it to
// the latest schema (unless o.NoMigration). On PostgreSQL it starts the
// group commit of RecordEvent (unless o.NoGroupCommit), which Close stops.
func Open(ctx context.Context, rawURL string, o Options) (*Store, error) {
	dialect, dsn, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	o = o.withDefaults()
	s := &Store{dialect: dialect, now: o.Clock, maxConns: o.MaxConns}
	if dialect == SQLite {
		s.path, _, _ = strings.Cut(strings.TrimPrefix(rawURL, "sqlite://"), "?")
	}
	if len(o.SecretKey) > 0 {
		if s.aead, s.keys, err = secretCipher(o.SecretKey); err != nil {
			return nil, err
		}
	}
	driver := "pgx"
	if dialect == SQLite {
		driver = "sqlite"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("store: opening %s: %w", Redact(rawURL), err)
	}
	if dialect == SQLite {
		// One writer at a time is SQLite's model; a single connection
		// avoids SQLITE_BUSY between our own goroutines.
		db.SetMaxOpenConns(1)
	} else {
		db.SetMaxOpenConns(s.maxConns)
		// Keep as many idle as may be open: with database/sql's default of
		// two, an ingress whose relay works beside the group commit closed
		// a connection after nearly every burst and opened a new backend
		// for the next (473 sessions for 5,000 deliveries in
		// BenchmarkEndToEndLatency at 1,000/s), and PostgreSQL spent 0.6
		// to 0.7 of a core, half of it on them (0.3 with this). Idle time
		// (ConnMaxIdleTime) still closes the unused.
		db.SetMaxIdleConns(s.maxConns)
		db.SetConnMaxIdleTime(5 * time.Minute)
	}
	s.db = db
	if err := ping(ctx, db, dialect); err != nil {
		_ = db.Close()
		return nil, unreachableError{fmt.Sprintf("store: cannot reach %s: %v; check SITEOPS_DATABASE_URL", Redact(rawURL), err)}
	}
	// A store finalized for a later release was contracted past what this
	// binary reads (release.go): refused before anything is migrated.
	if err := s.checkFinalized(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	if !o.NoMigration {
		if err := s.migrate(ctx); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	if dialect == Postgres && !o.NoGroupCommit {
		// Made last, once nothing can fail: its loop runs until Close.
		s.group = newGroupCommitter(s)
	}
	return s, nil
}

func parseURL(raw string) (Dialect, string, error) {
	switch {
	case strings.HasPrefix(raw, "sqlite://"):
		path := strings.TrimPrefix(raw, "sqlite://")
		if path == "" {
			return "", "", fmt.Errorf("%w: sqlite:// needs a file path, e.g. sqlite:///var/lib/siteops/siteops.db", ErrBadURL)
		}
		query := ""
		if p, q, found := strings.Cut(path, "?"); found {
			path, query = p, "&"+q
		}
		return SQLite, "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate" + query, nil
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		u, err := url.Parse(raw)
		if err != nil {
			return "", "", fmt.Errorf("%w: %s is not a valid URL; check SITEOPS_DATABASE_URL", ErrBadURL, Redact(raw))
		}
		// The store's sessions name themselves, so that the server's
		// pg_stat_activity (and ConnectionBudget) tells siteops' from
		// the rest, unless the URL names them already.
		if q := u.Query(); !q.Has("application_name") {
			q.Set("application_name", ApplicationName)
			u.RawQuery = q.Encode()
			raw = u.String()
		}
		return Postgres, raw, nil
	}
	return "", "", fmt.Errorf("%w: SITEOPS_DATABASE_URL %q must start with sqlite:// or postgres://", ErrBadURL, Redact(raw))
}

// ApplicationName is what the store's PostgreSQL sessions call themselves
// when the URL does not set application_name.
const ApplicationName = "siteops"

// hiddenValue stands for what Redact hides; url.Redacted hides a
// userinfo's password with the same.
const hiddenValue = "xxxxx"

// Redact hides the password in a database URL, for logs, errors and
// output: the userinfo's, and every query parameter whose name holds
// "password" (PostgreSQL reads ?password=, and sslpassword for a client
// key). What it cannot read for sure is hidden whole after the scheme: a
// string that does not parse as scheme://…, a key=value DSN, an '@'
// outside the userinfo, "password" left anywhere else. A query piece that
// is not a plain name=value (a raw '%', a ';', no '=') and a fragment are
// hidden on their own.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return redactAll(raw)
	}
	ats := strings.Count(raw, "@")
	if (u.User == nil && ats > 0) || (u.User != nil && ats > 1) || secretParam(u.Path) {
		// A password with '@', '/', '?' or '#' in it that the parse split
		// elsewhere.
		return redactAll(raw)
	}
	if u.RawQuery != "" {
		u.RawQuery = redactQuery(u.RawQuery)
	}
	if u.Fragment != "" || u.RawFragment != "" {
		u.Fragment, u.RawFragment = hiddenValue, ""
	}
	out := u.String()
	if u.User != nil {
		out = u.Redacted()
	}
	if showsPassword(out) {
		return redactAll(raw)
	}
	return out
}

// showsPassword reports whether "password" appears in s, plain or
// escaped, other than as a parameter's hidden name.
func showsPassword(s string) bool {
	texts := []string{strings.ToLower(s)}
	if u, err := url.QueryUnescape(s); err == nil {
		texts = append(texts, strings.ToLower(u))
	}
	for _, t := range texts {
		for {
			i := strings.Index(t, "password")
			if i < 0 {
				break
			}
			t = t[i+len("password"):]
			if !strings.HasPrefix(t, "="+hiddenValue) {
				return true
			}
		}
	}
	return false
}

// schemeRune reports whether r may stand in a URL's scheme.
func schemeRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'
}

// redactAll is raw hidden after its scheme, when it has one in form.
func redactAll(raw string) string {
	scheme, _, found := strings.Cut(raw, "://")
	if !found || scheme == "" || strings.IndexFunc(scheme, func(r rune) bool { return !schemeRune(r) }) >= 0 {
		return hiddenValue
	}
	return scheme + "://" + hiddenValue
}

// redactQuery hides the values of a URL query's secret parameters, and
// every piece (between '&') that is not a plain name=value: its parts do
// not unescape, it holds a ';' (which Go's and pgx's parsers refuse, and
// a reader may take for a separator), or it has no '='; and a value that
// names a password itself.
func redactQuery(q string) string {
	pieces := strings.Split(q, "&")
	for i, p := range pieces {
		if p == "" {
			continue
		}
		name, value, ok := strings.Cut(p, "=")
		n, errName := url.QueryUnescape(name)
		v, errValue := url.QueryUnescape(value)
		switch {
		case !ok || errName != nil || strings.Contains(name, ";"):
			pieces[i] = hiddenValue
		case secretParam(n) || errValue != nil || strings.Contains(value, ";") || secretParam(v):
			pieces[i] = name + "=" + hiddenValue
		}
	}
	return strings.Join(pieces, "&")
}

// secretParam reports whether a connection parameter holds a secret.
func secretParam(name string) bool {
	return strings.Contains(strings.ToLower(name), "password")
}

func (s *Store) migrate(ctx context.Context) error {
	p, err := s.migrations()
	if err != nil {
		return err
	}
	if s.dialect == SQLite {
		// Processes started together (a worker and an ingress on one
		// file) must not migrate at once: PostgreSQL has goose's session
		// lock, SQLite a lock file beside the database.
		unlock, err := lockFile(s.path + ".migrate-lock")
		if err != nil {
			return fmt.Errorf("store: locking %s for migration: %w", s.path, err)
		}
		defer unlock()
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("store: migrating: %w", err)
	}
	return nil
}

// PendingMigrations returns the schema version of the database and how
// many migrations Open would still apply. It only reads: goose's own
// status would create its version table (and take PostgreSQL's session
// lock), and a check must change nothing, so it reads that table itself
// and counts a database without it as not migrated at all.
func (s *Store) PendingMigrations(ctx context.Context) (version int64, pending int, err error) {
	version, pending, _, err = s.schema(ctx)
	return version, pending, err
}

// AheadMigrations lists the applied migrations this build does not know:
// a later release migrated the store, and this binary is older than its
// newest schema. Expand-only migrations keep that store readable by this
// binary until the later release is finalized (Open then refuses).
func (s *Store) AheadMigrations(ctx context.Context) ([]int64, error) {
	_, _, ahead, err := s.schema(ctx)
	return ahead, err
}

// schema reads the applied migrations against this build's: the highest
// known one applied, how many known ones are not, and the applied ones
// this build does not know.
func (s *Store) schema(ctx context.Context) (version int64, pending int, ahead []int64, err error) {
	p, err := s.migrations()
	if err != nil {
		return 0, 0, nil, err
	}
	dialect, exists := database.DialectSQLite3, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = $1`
	if s.dialect == Postgres {
		dialect, exists = database.DialectPostgres, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = $1`
	}
	var tables int
	if err := s.db.QueryRowContext(ctx, exists, goose.DefaultTablename).Scan(&tables); err != nil {
		return 0, 0, nil, fmt.Errorf("store: reading the schema version: %w", err)
	}
	applied := map[int64]bool{}
	if tables > 0 {
		versions, err := database.NewStore(dialect, goose.DefaultTablename)
		if err != nil {
			return 0, 0, nil, err
		}
		list, err := versions.ListMigrations(ctx, s.db)
		if err != nil {
			return 0, 0, nil, fmt.Errorf("store: reading the schema version: %w", err)
		}
		for _, m := range list {
			applied[m.Version] = applied[m.Version] || m.IsApplied
		}
	}
	known := map[int64]bool{}
	for _, src := range p.ListSources() {
		known[src.Version] = true
		if !applied[src.Version] {
			pending++
		} else if src.Version > version {
			version = src.Version
		}
	}
	for v, ok := range applied {
		// goose records version 0 for its own table.
		if ok && v > 0 && !known[v] {
			ahead = append(ahead, v)
		}
	}
	slices.Sort(ahead)
	return version, pending, ahead, nil
}

func (s *Store) migrations() (*goose.Provider, error) {
	sub, err := fs.Sub(migrations, "migrations/"+string(s.dialect))
	if err != nil {
		return nil, err
	}
	opts := []goose.ProviderOption{}
	gooseDialect := goose.DialectSQLite3
	if s.dialect == Postgres {
		gooseDialect = goose.DialectPostgres
		// Several replicas may start at once: one migrates, the others wait.
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return nil, err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(gooseDialect, s.db, sub, opts...)
	if err != nil {
		return nil, fmt.Errorf("store: loading migrations: %w", err)
	}
	return p, nil
}

// Dialect reports which database the store uses.
func (s *Store) Dialect() Dialect { return s.dialect }

// DB exposes the handle for packages that keep their own tables here.
func (s *Store) DB() *sql.DB { return s.db }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Close stops the group commit, once the commits in flight have ended
// (RecordEvent then fails with ErrClosed), and closes the database.
func (s *Store) Close() error {
	if s.group != nil {
		s.group.close()
	}
	return s.db.Close()
}

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

// HasSecretKey reports whether the store was opened with the key that
// encrypts signing secrets.
func (s *Store) HasSecretKey() bool { return s.aead != nil }

// placeholdersFrom returns "$first,$first+1,..." for n arguments.
func placeholdersFrom(first, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "$%d", first+i)
	}
	return b.String()
}

// ping checks that db answers. On SQLite a new connection's first
// statements are its pragmas, and switching a new file to WAL while
// another connection (a worker and an ingress started together) does the
// same answers SQLITE_BUSY at once, without waiting out busy_timeout: that
// is tried again for as long as the timeout (10 s), never past ctx.
func ping(ctx context.Context, db *sql.DB, d Dialect) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := db.PingContext(ctx)
		if err == nil || d != SQLite || !strings.Contains(err.Error(), "SQLITE_BUSY") || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// InvalidIndexes lists the indexes of the store's schema that PostgreSQL
// keeps up to date but never reads: what a CREATE INDEX CONCURRENTLY that
// was interrupted (a pod stopped mid-rollout) leaves behind. Migrations
// 00007 and 00010 build theirs so, with IF NOT EXISTS, which then keeps
// the invalid one: the reads it serves scan instead (the relay's gauges,
// an onboarding's events). None on SQLite, which builds indexes in a
// transaction.
func (s *Store) InvalidIndexes(ctx context.Context) ([]string, error) {
	if s.dialect != Postgres {
		return nil, nil
	}
	names, err := s.queryStrings(ctx, `SELECT c.relname FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE NOT i.indisvalid AND n.nspname = current_schema() ORDER BY c.relname`)
	if err != nil {
		return nil, fmt.Errorf("store: listing invalid indexes: %w", err)
	}
	return names, nil
}

// queryStrings runs q and returns its one text column, row by row.
func (s *Store) queryStrings(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
