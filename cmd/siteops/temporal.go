package main

import (
	"context"
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
// fails with a *starter.UnavailableError that names the address, what was
// tried and the last cause (exit 5).
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
	// A person at a terminal is told at once that the command retries; a
	// script's standard error keeps one line, the outcome.
	var retrying func(msg string)
	if stderr := cmd.ErrOrStderr(); isTerminal(stderr) {
		retrying = func(msg string) { c.warn(stderr, msg) }
	}
	return c.drive(cmd, tf, withStore, patience, retrying, f)
}

// withStarter dials Temporal (and opens the store when withStore), runs f,
// and closes them again: the frame of every command that drives workflows.
func (c *cli) withStarter(cmd *cobra.Command, tf *temporalFlags, withStore bool, f func(s *starter.Starter) error) error {
	return c.drive(cmd, tf, withStore, 0, nil, f)
}

// drive is withStarter riding out Temporal being unavailable for patience
// (wiring.PatientStarter), telling retrying once.
func (c *cli) drive(cmd *cobra.Command, tf *temporalFlags, withStore bool, patience time.Duration, retrying func(string), f func(s *starter.Starter) error) error {
	t, err := tf.load()
	if err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	s, closeAll, err := wiring.PatientStarter(cmd.Context(), t, withStore, quietLogger(stderr), patience, retrying, func(msg string) { c.warn(stderr, msg) })
	if err != nil {
		return err
	}
	defer closeAll()
	return f(s)
}
