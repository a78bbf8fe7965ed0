// Command siteops automates the Agent-Site API with durable Temporal
// workflows: the worker, the webhook ingress, the starter commands used by
// other systems and on-call, a local simulator of the API, and a demo.
//
// main only parses flags and configuration and hands over to the packages;
// every subcommand is a cobra command in this directory.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "siteops:", err)
		os.Exit(1)
	}
}

// exitError ends the process with code after the command has already
// reported what went wrong.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }
