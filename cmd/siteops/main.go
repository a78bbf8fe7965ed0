// Command siteops automates the Agent-Site API with durable Temporal
// workflows: the worker, the webhook ingress, the starter commands used by
// other systems and on-call, a local simulator of the API, and a demo.
//
// main only parses flags and configuration and hands over to the packages;
// every subcommand is a cobra command in this directory. Exit codes are in
// exitcode.go and the README.
package main

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/siteops/siteops/config"
)

func main() {
	// Secrets given as files (NAME_FILE) become variables before anything
	// reads the environment: envconfig, the Temporal SDK's loader, children.
	if err := config.LoadSecretFiles(); err != nil {
		asked := outputAsked(os.Args[1:])
		writeError(os.Stderr, err, exitUsage, asked == "json" || asked == "jsonl")
		os.Exit(exitUsage)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// run runs the CLI with args and returns the process's exit code, having
// written any error as one line (JSON with -o json) to standard error.
func run(ctx context.Context, args []string) int {
	cli := newCLI()
	root := cli.root()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if asked := outputAsked(args); !cli.ran && (asked == "json" || asked == "jsonl") {
		// Parsing stopped at a bad flag before it reached -o json: the
		// error is still the one JSON object the script asked for.
		cli.output = asked
	}
	return cli.fail(root.ErrOrStderr(), err)
}

// outputAsked returns the value args give -o/--output, wherever they give
// it (the last one wins, as when parsed), or "" if they do not.
func outputAsked(args []string) string {
	asked := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return asked
		case (a == "-o" || a == "--output") && i+1 < len(args):
			asked = args[i+1]
			i++
		case strings.HasPrefix(a, "--output="):
			asked = strings.TrimPrefix(a, "--output=")
		case strings.HasPrefix(a, "-o") && !strings.HasPrefix(a, "--"):
			asked = strings.TrimPrefix(strings.TrimPrefix(a, "-o"), "=")
		}
	}
	return asked
}
