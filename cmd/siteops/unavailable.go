package main

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/wiring"
)

// temporalPatience is how long a command keeps trying while Temporal is
// unavailable when its --timeout is 0 or it has none: long enough for a
// frontend or history service to restart, short enough that a script
// learns of an outage soon.
const temporalPatience = 20 * time.Second

// withTemporal is withStarter for a command that must ride out Temporal
// being briefly unavailable. limit is the command's --timeout (0: none):
// it bounds the whole command, the connection included. While Temporal
// cannot be reached or does not answer, the connection and the starter's
// calls are tried again with backoff until limit ends (temporalPatience
// when there is none), saying so once on a terminal; then the command
// fails with a
// *starter.UnavailableError that names the address, what was tried and
// the last cause (exit 5).
func (c *cli) withTemporal(cmd *cobra.Command, tf *temporalFlags, withStore bool, limit time.Duration, f func(s *starter.Starter) error) error {
	patience := limit
	if patience <= 0 {
		patience = temporalPatience
	}
	if limit > 0 {
		ctx, cancel := context.WithTimeout(cmd.Context(), limit)
		defer cancel()
		cmd.SetContext(ctx)
	}
	ctx := cmd.Context()
	address, namespace := temporalAddress(tf)
	// A person at a terminal is told at once that the command retries; a
	// script's standard error keeps one line, the outcome.
	var retrying func(msg string)
	if stderr := cmd.ErrOrStderr(); isTerminal(stderr) {
		retrying = func(msg string) { c.warn(stderr, msg) }
	}
	var (
		first    time.Time
		attempts int
		wait     = 500 * time.Millisecond
		e        = &starter.UnavailableError{Address: address, Namespace: namespace, What: starter.Connecting}
	)
	for {
		began := time.Now()
		dialed := false
		err := c.withStarter(cmd, tf, withStore, func(s *starter.Starter) error {
			dialed = true
			s.Patience, s.Address, s.Retrying = patience, address, retrying
			return f(s)
		})
		attempts++
		if dialed || !dialUnavailable(ctx, err, !first.IsZero()) {
			return err
		}
		if first.IsZero() {
			first = began
		}
		e.Attempts, e.Err, e.Waited, e.For = attempts, err, max(e.Waited, time.Since(began)), time.Since(first)
		if ctx.Err() != nil || e.For >= patience {
			return e
		}
		if attempts == 1 && retrying != nil {
			retrying(e.Warning(patience))
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return ctx.Err()
			}
			e.For = time.Since(first)
			return e
		case <-time.After(min(wait, time.Until(first.Add(patience)))):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// dialUnavailable reports whether a failed connection is worth another
// try: Temporal could not be reached or did not answer (retrying), or ctx
// ran out while it still did not. A server that refused the credentials,
// or speaks TLS where plaintext was configured (or the other way round),
// gives the same answer however often it is asked.
func dialUnavailable(ctx context.Context, err error, retrying bool) bool {
	switch {
	case err == nil, !errors.Is(err, wiring.ErrTemporalUnreachable), errors.Is(err, wiring.ErrTemporalAuth),
		errors.Is(ctx.Err(), context.Canceled):
		return false
	case strings.Contains(err.Error(), "TLS"):
		return false // DialError names TLS for a connection that cannot work as configured
	case retrying && ctx.Err() != nil:
		return true
	}
	return starter.IsUnavailable(ctx, err)
}

// temporalAddress names the Temporal frontend and namespace a command
// connects to, for its messages; "" when the settings cannot be read (the
// connection then fails with the reason).
func temporalAddress(tf *temporalFlags) (address, namespace string) {
	t, err := tf.load()
	if err != nil {
		return "", ""
	}
	_, conn, err := wiring.TemporalOptions(t, nil, nil)
	if err != nil {
		return "", ""
	}
	return conn.Address, conn.Namespace
}
