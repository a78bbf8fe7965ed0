package main

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/telemetry"
)

// quietLogger keeps the SDK's own info lines out of a command's output.
func quietLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// processLogger is the log of a long-running process: SITEOPS_LOG_FORMAT
// and SITEOPS_LOG_LEVEL, with -o json choosing JSON when the format is not
// set.
func (c *cli) processLogger(w io.Writer) (*slog.Logger, error) {
	var l config.Log
	if err := config.Load(&l); err != nil {
		return nil, err
	}
	if _, set := os.LookupEnv("SITEOPS_LOG_FORMAT"); !set && c.json() {
		l.Format = "json"
	}
	return l.Logger(w)
}

// runProcess runs a long-running process of service with its log
// (processLogger) and its telemetry, which it shuts down after.
func (c *cli) runProcess(cmd *cobra.Command, service string, run func(logger *slog.Logger, tel *telemetry.Telemetry) error) error {
	logger, err := c.processLogger(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	tel, err := telemetry.Setup(cmd.Context(), telemetry.Options{Service: service})
	if err != nil {
		return err
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()
	return run(logger, tel)
}
