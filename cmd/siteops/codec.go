package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/codec"
)

func newCodecServerCmd() *cobra.Command {
	var addr string
	var origins []string
	cmd := &cobra.Command{
		Use:   "codec-server",
		Short: "Decode encrypted payloads for the Temporal Web UI (SITEOPS_PAYLOAD_KEY)",
		Long: `Serve the Temporal codec-server protocol (POST /encode, POST /decode) with the
key in SITEOPS_PAYLOAD_KEY, so that people who hold the key can read workflow
inputs and results in the Temporal Web UI (Settings → Codec Server) or with
'temporal workflow show --codec-endpoint'. Bind it to localhost, or put it
behind your own authentication: it decrypts for anyone who can reach it.`,
		Example: "  SITEOPS_PAYLOAD_KEY=... siteops codec-server --addr 127.0.0.1:8081 --web-ui-origin http://localhost:8233",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			raw := os.Getenv("SITEOPS_PAYLOAD_KEY")
			if raw == "" {
				return errors.New("SITEOPS_PAYLOAD_KEY is not set; it must be the key the worker encrypts with")
			}
			key, err := codec.ParseKey(raw)
			if err != nil {
				return err
			}
			c, err := codec.New(key)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listening on %s: %w", addr, err)
			}
			srv := &http.Server{Handler: codec.Handler(c, origins), ReadHeaderTimeout: 5 * time.Second}
			go func() {
				<-cmd.Context().Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(ctx)
			}()
			_, _ = fmt.Fprintf(cmd.OutOrStdout(), "codec server for key %s on http://%s\n", c.KeyID(), ln.Addr())
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8081", "listen address")
	cmd.Flags().StringArrayVar(&origins, "web-ui-origin", []string{"http://localhost:8233"}, "Web UI origin allowed by CORS (repeatable)")
	return cmd
}
