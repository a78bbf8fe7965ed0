package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultPostgresURL is the admin connection used when neither
// Options.PostgresURL nor SITEOPS_TEST_POSTGRES_URL is set.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// PostgresURLEnv names the variable the tests already use for their
// PostgreSQL server; the cluster takes host, port and user from it.
const PostgresURLEnv = "SITEOPS_TEST_POSTGRES_URL"

// ErrPostgresUnreachable is returned (wrapped) by Start when the admin
// connection fails.
var ErrPostgresUnreachable = errors.New("the PostgreSQL server is not reachable")

// PostgresURL returns the admin connection Start uses by default:
// $SITEOPS_TEST_POSTGRES_URL, else DefaultPostgresURL.
func PostgresURL() string {
	if u := os.Getenv(PostgresURLEnv); u != "" {
		return u
	}
	return DefaultPostgresURL
}

// CheckPostgres connects to the PostgreSQL server of the admin URL raw
// (PostgresURL() when empty) as Start would, and returns an error wrapping
// ErrPostgresUnreachable when it cannot: for a caller that wants to say
// before a long run whether the cluster tests will run or skip.
func CheckPostgres(ctx context.Context, raw string) error {
	if raw == "" {
		raw = PostgresURL()
	}
	pg, err := parsePostgres(raw)
	if err != nil {
		return err
	}
	conn, err := pg.connect(ctx)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// pgServer is the PostgreSQL server the cluster's databases live on.
type pgServer struct {
	admin    string // the admin URL, password included
	host     string
	port     uint16
	user     string
	password string
}

func parsePostgres(raw string) (pgServer, error) {
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return pgServer{}, fmt.Errorf("cluster: PostgreSQL URL %s: %w", redact(raw), err)
	}
	if strings.HasPrefix(cfg.Host, "/") {
		return pgServer{}, fmt.Errorf("cluster: PostgreSQL URL %s names a Unix socket; the Temporal server needs a TCP host:port", redact(raw))
	}
	return pgServer{admin: raw, host: cfg.Host, port: cfg.Port, user: cfg.User, password: cfg.Password}, nil
}

// addr is the server's host:port.
func (s pgServer) addr() string { return s.host + ":" + strconv.Itoa(int(s.port)) }

// connect opens the admin connection, with an error that says what to do
// when the server cannot be reached.
func (s pgServer) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.admin)
	if err == nil {
		err = conn.Ping(ctx)
		if err != nil {
			_ = conn.Close(context.Background())
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w at %s (%w): start it, or point %s (or localcluster --postgres) at a server where this user may create databases",
			ErrPostgresUnreachable, redact(s.admin), err, PostgresURLEnv)
	}
	return conn, nil
}

// createDatabases creates the cluster's two databases.
func (s pgServer) createDatabases(ctx context.Context, names ...string) error {
	conn, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	for i, n := range names {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{n}.Sanitize()); err != nil {
			for _, created := range names[:i] {
				_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{created}.Sanitize())
			}
			return fmt.Errorf("cluster: creating database %s on %s: %w (the user needs CREATEDB)", n, s.addr(), err)
		}
	}
	return nil
}

// dropDatabases drops the cluster's databases if they exist, closing the
// connections a killed server may have left behind.
func (s pgServer) dropDatabases(ctx context.Context, names ...string) error {
	conn, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var errs []error
	for _, n := range names {
		q := "DROP DATABASE IF EXISTS " + pgx.Identifier{n}.Sanitize()
		if _, err := conn.Exec(ctx, q+" WITH (FORCE)"); err != nil {
			// PostgreSQL before 13 has no FORCE.
			if _, err2 := conn.Exec(ctx, q); err2 != nil {
				errs = append(errs, fmt.Errorf("cluster: dropping database %s on %s: %w", n, s.addr(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// newDatabaseName returns a name no other run uses: siteops_tc_<12 hex>.
func newDatabaseName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "siteops_tc_" + hex.EncodeToString(b[:])
}

// redact hides the password of a URL for messages.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}
