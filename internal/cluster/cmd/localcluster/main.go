// Command localcluster starts and stops the local Temporal cluster of
// `make cluster` and `make cluster-down`, through package cluster (the same
// code the tests use), and tells `make test` whether the cluster tests will
// run:
//
//	localcluster up    [--dir .cluster] [--namespace siteops] [--postgres URL]
//	localcluster down  [--dir .cluster] [--postgres URL]
//	localcluster check [--postgres URL]
//
// up leaves the services running in the background, with their logs in the
// directory, and prints the variables to export; down stops them and drops
// the cluster's databases. Without --postgres, down (and up, when it finds
// a cluster) connects with $SITEOPS_TEST_POSTGRES_URL when it names the
// cluster's server, since the state file never holds the password. check
// prints one line saying whether the tests that need PostgreSQL (the cluster
// tests among them) will run or skip; it exits 0 either way, as skipping is
// allowed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	neturl "net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/siteops/siteops/internal/cluster"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		_, _ = fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "up" && args[0] != "down" && args[0] != "check") {
		return errors.New("usage: localcluster up|down|check [--dir DIR] [--namespace NS] [--postgres URL]")
	}
	fs := flag.NewFlagSet("localcluster "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".cluster", "directory of the cluster's state and logs")
	ns := fs.String("namespace", "siteops", "namespace to register besides default (the one printed to export)")
	pg := fs.String("postgres", "", "admin connection to PostgreSQL (default $"+cluster.PostgresURLEnv+", else "+cluster.DefaultPostgresURL+")")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "down":
		return down(*dir, *pg, stdout)
	case "check":
		check(ctx, *pg, stdout)
		return nil
	}
	return up(ctx, *dir, *ns, *pg, stdout, stderr)
}

func up(ctx context.Context, dir, ns, pg string, stdout, stderr io.Writer) error {
	if c, err := cluster.Attach(dir, pg, stderr); err == nil {
		switch running := c.Running(); len(running) {
		case len(cluster.Services):
			_, _ = fmt.Fprintf(stdout, "the cluster in %s is already running\n", dir)
			printEnv(stdout, c)
			return siteopsStore(ctx, c, stdout)
		case 0:
			// Left over from a crash or a reboot: clean it up, then start anew.
			if err := c.Stop(); err != nil {
				return fmt.Errorf("cleaning up the stopped cluster in %s: %w", dir, err)
			}
		default:
			return fmt.Errorf("the cluster in %s is partly running (%v); run `make cluster-down` first", dir, running)
		}
	} else if !errors.Is(err, cluster.ErrNoCluster) {
		return err
	}
	c, err := cluster.Start(ctx, cluster.Options{
		PostgresURL: pg,
		Dir:         dir,
		Namespaces:  []string{ns},
		Log:         stderr,
		Detached:    true,
	})
	if errors.Is(err, cluster.ErrPostgresUnreachable) {
		return fmt.Errorf("%w\nThe cluster keeps its state in PostgreSQL. Start one (for example `docker run -d -p 5432:5432 -e POSTGRES_HOST_AUTH_METHOD=trust postgres:16`) or name yours with --postgres URL", err)
	}
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintf(stdout, "Temporal %s cluster running: frontend %s, HTTP API http://%s, logs in %s\n", cluster.ServerVersion, c.Address, c.HTTPAddress, c.Dir)
	printEnv(stdout, c)
	if err := siteopsStore(ctx, c, stdout); err != nil {
		return err
	}
	_, _ = fmt.Fprintln(stdout, "Stop it with: make cluster-down")
	return nil
}

// siteopsStore creates the database for siteops' own store beside the
// cluster's (dropped with them by make cluster-down) and says how to point
// siteops at it.
func siteopsStore(ctx context.Context, c *cluster.Cluster, stdout io.Writer) error {
	u, err := c.CreateSiteopsDatabase(ctx)
	if err != nil {
		return fmt.Errorf("creating the database for siteops' store: %w", err)
	}
	_, _ = fmt.Fprintf(stdout, "  export SITEOPS_DATABASE_URL='%s'   # siteops' own store, beside the cluster's databases (add the password if the server asks for one)\n", u)
	return nil
}

// check says in one line whether the tests that need PostgreSQL will run:
// go test shows nothing of a package that passes, skipped tests included,
// so without it a run that skipped the cluster scenario looks like one
// that ran it.
func check(ctx context.Context, pg string, stdout io.Writer) {
	url := pg
	if url == "" {
		url = cluster.PostgresURL()
	}
	if err := cluster.CheckPostgres(ctx, url); err != nil {
		// The innermost cause, on one line: the whole chain repeats the
		// URL and puts each address pgx tried on a line of its own.
		cause := innermost(err)
		_, _ = fmt.Fprintf(stdout, "SKIPPING the tests that need PostgreSQL (the Temporal cluster scenario in e2e/production and internal/cluster, the PostgreSQL store variants): cannot connect to %s (%s); make sure it runs and accepts this user, or point SITEOPS_TEST_POSTGRES_URL at one that does\n",
			redacted(url), strings.Join(strings.Fields(cause.Error()), " "))
		return
	}
	missing := ""
	for _, find := range []func() (string, error){cluster.FindServer, cluster.FindSQLTool} {
		if _, err := find(); err != nil {
			missing = "; but " + err.Error()
		}
	}
	_, _ = fmt.Fprintf(stdout, "PostgreSQL reachable at %s: the tests that need it run, the Temporal cluster scenario among them%s\n", redacted(url), missing)
}

// innermost follows err's chain to its root cause, taking the last of a
// joined set (the cause comes after the sentinel in "%w ... %w").
func innermost(err error) error {
	for {
		switch u := err.(type) { //nolint:errorlint // walking the chain by hand
		case interface{ Unwrap() error }:
			if next := u.Unwrap(); next != nil {
				err = next
				continue
			}
		case interface{ Unwrap() []error }:
			if errs := u.Unwrap(); len(errs) > 0 {
				err = errs[len(errs)-1]
				continue
			}
		}
		return err
	}
}

// redacted hides the password of a URL.
func redacted(raw string) string {
	if u, err := neturl.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}

func printEnv(w io.Writer, c *cluster.Cluster) {
	_, _ = fmt.Fprintln(w, "Point siteops, the temporal CLI and the SDKs at it with:")
	for _, kv := range c.Env() {
		k, v, _ := strings.Cut(kv, "=")
		_, _ = fmt.Fprintf(w, "  export %s=%s\n", k, v)
	}
	_, _ = fmt.Fprintf(w, "  export TEMPORAL_HTTP_ADDRESS=%s   # the HTTP API, for curl (no SDK reads it)\n", c.HTTPAddress)
}

func down(dir, pg string, stdout io.Writer) error {
	c, err := cluster.Attach(dir, pg, stdout)
	if errors.Is(err, cluster.ErrNoCluster) {
		_, _ = fmt.Fprintf(stdout, "no cluster in %s\n", dir)
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.Stop(); err != nil {
		if errors.Is(err, cluster.ErrPostgresUnreachable) {
			return fmt.Errorf("the services are stopped but the databases %s and %s remain: %w; run `make cluster-down` again once PostgreSQL is up", c.Database, c.VisibilityDatabase, err)
		}
		return err
	}
	_, _ = fmt.Fprintf(stdout, "cluster stopped; databases %s, %s and %s (siteops' store) dropped\n", c.Database, c.VisibilityDatabase, c.SiteopsDatabase())
	return nil
}
