package main

import (
	"github.com/spf13/cobra"

	"github.com/siteops/siteops/wiring"
)

// preflightFlags are the flags of the processes that check before they
// start.
type preflightFlags struct{ skip bool }

func (p *preflightFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&p.skip, "skip-checks", false, "start even if a start-up check fails (each failure is logged as an error)")
}

func (p *preflightFlags) options() wiring.Preflight { return wiring.Preflight{Skip: p.skip} }
