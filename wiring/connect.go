package wiring

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/starter"
)

// PatientStarter is Starter for a command that rides out Temporal being
// briefly unavailable. While Temporal cannot be reached or does not
// answer, the connection is tried again with backoff for at most patience
// and never past ctx, telling retrying once (when set); then it fails with
// a *starter.UnavailableError that names the address, what was tried and
// the last cause. Credentials Temporal refuses, and a connection that
// cannot work as configured (TLS against plaintext, or the other way
// round), fail at once: no retry fixes them. The starter it returns
// retries its own calls for as long (Patience, Address, Retrying), and
// tells warn (when set) what a caller should know but does not stop it.
// With no patience it is Starter, tried once.
//
// The rest of its settings it reads from the environment: the database's
// when withStore (the store of knowledge texts), and the receiver policy
// (SITEOPS_PUBLIC_URL, SITEOPS_ALLOW_LOOPBACK_RECEIVERS) that the starter
// applies to endpoint URLs before anything starts.
func PatientStarter(ctx context.Context, t config.Temporal, withStore bool, logger *slog.Logger, patience time.Duration, retrying, warn func(msg string)) (*starter.Starter, func(), error) {
	var db *config.Database
	if withStore {
		db = &config.Database{}
		if err := config.Load(db); err != nil {
			return nil, nil, err
		}
	}
	var site config.AgentSite
	if err := config.Load(&site); err != nil {
		return nil, nil, err
	}
	receivers, err := activities.ParseReceiverPolicy(site.PublicURL, site.AllowLoopback)
	if err != nil {
		return nil, nil, config.Invalid("%v", err)
	}
	return patientStarter(ctx, t, db, logger, patience, retrying, starter.Options{Receivers: &receivers, Warn: warn})
}

func patientStarter(ctx context.Context, t config.Temporal, db *config.Database, logger *slog.Logger, patience time.Duration, retrying func(msg string), so starter.Options) (*starter.Starter, func(), error) {
	if patience <= 0 {
		return starterWith(ctx, t, db, logger, so)
	}
	// The address names Temporal in messages; settings that cannot be
	// read fail the connection below, with the reason.
	var address, namespace string
	if _, conn, err := TemporalOptions(t, nil, nil); err == nil {
		address, namespace = conn.Address, conn.Namespace
	}
	so.Patience, so.Address, so.Retrying = patience, address, retrying
	var (
		s        *starter.Starter
		closeAll func()
		e        = &starter.UnavailableError{Address: address, Namespace: namespace, What: starter.Connecting}
	)
	err := starter.Retry(ctx, patience, e, retrying, func() error {
		var err error
		s, closeAll, err = starterWith(ctx, t, db, logger, so)
		return err
	}, func(err error, again bool) (bool, error) {
		return dialUnavailable(ctx, err, again), err
	})
	if err != nil {
		return nil, nil, err
	}
	return s, closeAll, nil
}

// dialUnavailable reports whether a failed connection is worth another
// try: Temporal could not be reached or did not answer (again, after an
// earlier try found it so), or ctx ran out while it still did not. A
// server that refused the credentials, or speaks TLS where plaintext was
// configured (or the other way round), gives the same answer however
// often it is asked.
func dialUnavailable(ctx context.Context, err error, again bool) bool {
	switch {
	case err == nil, !errors.Is(err, ErrTemporalUnreachable), errors.Is(err, ErrTemporalAuth),
		errors.Is(ctx.Err(), context.Canceled):
		return false
	case strings.Contains(err.Error(), "TLS"):
		return false // DialError names TLS for a connection that cannot work as configured
	case again && starter.ContextEnded(ctx) != nil:
		return true
	}
	return starter.IsUnavailable(ctx, err)
}
