package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
)

func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// quietLogger keeps the SDK's own info lines out of a command's output.
func quietLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// starterConfig is what the starter commands read from the environment.
type starterConfig struct {
	config.Temporal
	config.Database
}

// newStarter dials Temporal and, when withStore, opens the store.
func newStarter(ctx context.Context, cmd *cobra.Command, withStore bool) (*starter.Starter, func(), error) {
	var cfg starterConfig
	if err := config.Load(&cfg); err != nil {
		return nil, nil, err
	}
	c, err := cfg.Dial(ctx, quietLogger(cmd.ErrOrStderr()), nil)
	if err != nil {
		return nil, nil, err
	}
	s := &starter.Starter{Client: c, TaskQueue: cfg.TaskQueue, Namespace: cfg.Namespace}
	closers := []func(){c.Close}
	if withStore {
		st, err := store.Open(ctx, cfg.Database.URL)
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		s.Texts = st
		closers = append(closers, func() { _ = st.Close() })
	}
	return s, func() {
		for _, f := range closers {
			f()
		}
	}, nil
}

// output is the --output flag: text for people, json for scripts.
type output struct{ format string }

func (o *output) register(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.format, "output", "o", "text", "output format: text or json")
}

func (o *output) check() error {
	if o.format != "text" && o.format != "json" {
		return fmt.Errorf("--output %q: use text or json", o.format)
	}
	return nil
}

func (o *output) json() bool { return o.format == "json" }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func defaultOperator() string {
	if u := os.Getenv("SITEOPS_OPERATOR"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown"
}

// withStarter dials Temporal (and opens the store when withStore), runs f,
// and closes them again: the frame of every command that drives workflows.
func withStarter(cmd *cobra.Command, withStore bool, f func(s *starter.Starter) error) error {
	s, closeAll, err := newStarter(cmd.Context(), cmd, withStore)
	if err != nil {
		return err
	}
	defer closeAll()
	return f(s)
}
