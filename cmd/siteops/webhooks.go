package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// apiConfig is what the commands that call the API directly read.
type apiConfig struct {
	config.AgentSite
	config.Database
	// AllowLoopback is the simulator's test mode, for demos and tests.
	AllowLoopback bool `envconfig:"SITEOPS_ALLOW_LOOPBACK_RECEIVERS" default:"false"`
}

// newAPIClient reads the API settings from the environment and builds the
// client.
func newAPIClient() (*agentsite.Client, apiConfig, error) {
	var cfg apiConfig
	if err := config.Load(&cfg); err != nil {
		return nil, cfg, err
	}
	if err := cfg.AgentSite.Validate(); err != nil {
		return nil, cfg, err
	}
	var opts []agentsite.Option
	if cfg.AllowLoopback {
		opts = append(opts, agentsite.WithLoopbackReceivers())
	}
	c, err := agentsite.NewClient(cfg.BaseURL, cfg.APIKey, opts...)
	return c, cfg, err
}

func newWebhookCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "webhook", Short: "Register and list the account's webhook endpoints"}
	cmd.AddCommand(newWebhookCreateCmd(), newWebhookListCmd())
	return cmd
}

func newWebhookCreateCmd() *cobra.Command {
	var (
		rawURL, receiver, key string
		events                []string
		out                   output
	)
	cmd := &cobra.Command{
		Use:   "create --url URL --events lead.created,knowledge.ready [--receiver NAME]",
		Short: "Register an endpoint and store its one-time secret; prints only the id and a fingerprint",
		Long: `Register a webhook endpoint and store its one-time signing secret, encrypted
with SITEOPS_SECRET_KEY, for the ingress receiver the URL points at
(/webhooks → the default receiver, /webhooks/NAME → NAME). The secret is
never printed: only the endpoint id and the secret's fingerprint.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			api, cfg, err := newAPIClient()
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("receiver") {
				if receiver, err = starter.ReceiverFromURL(rawURL); err != nil {
					return err
				}
			}
			st, err := openSecretStore(cmd, cfg.Database)
			if err != nil {
				return err
			}
			defer func() { _ = st.Close() }()
			if key == "" {
				key = "webhook-create/" + randomHex(8)
			}
			ep, fp, err := starter.CreateEndpoint(cmd.Context(), api, st, key, rawURL, events, receiver)
			if err != nil {
				return err
			}
			if out.json() {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"endpoint_id": ep.ID, "url": ep.URL, "events": ep.Events, "receiver": receiver, "fingerprint": fp})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "endpoint %s → %s (receiver %q) for %s; secret stored, fingerprint %s\n", ep.ID, ep.URL, receiver, strings.Join(ep.Events, ", "), fp)
			return err
		},
	}
	cmd.Flags().StringVar(&rawURL, "url", "", "public HTTPS receiver URL")
	cmd.Flags().StringSliceVar(&events, "events", nil, "event types to subscribe to (comma-separated)")
	cmd.Flags().StringVar(&receiver, "receiver", "", "ingress receiver name (default: from the URL)")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "reuse to retry a create whose answer was lost (default: a new key)")
	out.register(cmd)
	_ = cmd.MarkFlagRequired("url")
	_ = cmd.MarkFlagRequired("events")
	return cmd
}

func openSecretStore(cmd *cobra.Command, db config.Database) (*store.Store, error) {
	key, err := db.Key()
	if err != nil {
		return nil, err
	}
	if key == nil {
		return nil, store.ErrNoSecretKey
	}
	return store.Open(cmd.Context(), db.URL, store.WithSecretKey(key))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newWebhookListCmd() *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the account's webhook endpoints with their last delivery (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			api, _, err := newAPIClient()
			if err != nil {
				return err
			}
			eps, err := api.ListWebhookEndpoints(cmd.Context())
			if err != nil {
				return err
			}
			if out.json() {
				return writeJSON(cmd.OutOrStdout(), eps)
			}
			w := cmd.OutOrStdout()
			for _, e := range eps {
				last := "no delivery yet"
				if d := e.LastDelivery; d != nil {
					last = fmt.Sprintf("last delivery %s %s (%d) at %s", d.EventID, d.Outcome, d.StatusCode, d.At.Format(time.RFC3339))
				}
				_, _ = fmt.Fprintf(w, "%s  %s  %s  [%s]  %s\n", e.ID, e.Status, e.URL, strings.Join(e.Events, ","), last)
				if e.LastError != nil {
					_, _ = fmt.Fprintf(w, "    last error: %s\n", *e.LastError)
				}
			}
			return nil
		},
	}
	out.register(cmd)
	return cmd
}

func newSecretCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "secret", Short: "Rotate a webhook endpoint's signing secret with an overlap"}
	cmd.AddCommand(newSecretRotateCmd(), newSecretDecideCmd(workflows.RotationProceed), newSecretDecideCmd(workflows.RotationAbort))
	return cmd
}

func newSecretRotateCmd() *cobra.Command {
	var (
		endpoint, rawURL, receiver, operator string
		verify, grace                        time.Duration
		wait                                 bool
		out                                  output
	)
	cmd := &cobra.Command{
		Use:   "rotate --endpoint ID --url URL [--wait]",
		Short: "Rotate an endpoint's secret: new endpoint, overlap, verified delivery, delete the old one",
		Long: `Start secret-rotation/<endpoint>: create a second endpoint with the same events
at URL (a versioned path such as /webhooks/v2, or the same URL), store its
secret, accept both secrets, wait for a verified delivery on the new endpoint,
delete the old endpoint, and retire its secret after the grace period. If no
verified delivery comes within --verify-timeout, decide with
'siteops secret proceed|abort --endpoint ID'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			return withStarter(cmd, false, func(s *starter.Starter) error {
				run, err := s.RotateSecret(cmd.Context(), starter.RotationRequest{
					OldEndpointID: endpoint, NewURL: rawURL, Receiver: receiver, VerifyTimeout: verify, GracePeriod: grace, Operator: operator,
				})
				if err != nil {
					return err
				}
				if !wait {
					if out.json() {
						return writeJSON(cmd.OutOrStdout(), map[string]string{"workflow_id": run.GetID(), "run_id": run.GetRunID()})
					}
					_, err := fmt.Fprintf(cmd.OutOrStdout(), "started %s; follow it with: siteops status %s\n", run.GetID(), run.GetID())
					return err
				}
				var st workflows.SecretRotationStatus
				if err := run.Get(cmd.Context(), &st); err != nil {
					return fmt.Errorf("%s failed: %w", run.GetID(), err)
				}
				if out.json() {
					return writeJSON(cmd.OutOrStdout(), st)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s %s: new endpoint %s (fingerprint %s); old endpoint %s deleted, its secret retires at %s\n",
					run.GetID(), st.Step, st.NewEndpointID, st.NewFingerprint, st.OldEndpointID, st.OldRetiresAt.Format(time.RFC3339))
				return err
			})
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "id of the endpoint whose secret is rotated")
	cmd.Flags().StringVar(&rawURL, "url", "", "URL of the new endpoint")
	cmd.Flags().StringVar(&receiver, "receiver", "", "ingress receiver of the new URL (default: from the URL)")
	cmd.Flags().DurationVar(&verify, "verify-timeout", 10*time.Minute, "how long to wait for a verified delivery on the new endpoint")
	cmd.Flags().DurationVar(&grace, "grace", time.Hour, "how long the old secret stays accepted after the old endpoint is deleted")
	cmd.Flags().StringVar(&operator, "operator", defaultOperator(), "who is acting")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the rotation to finish")
	out.register(cmd)
	_ = cmd.MarkFlagRequired("endpoint")
	_ = cmd.MarkFlagRequired("url")
	return cmd
}

func newSecretDecideCmd(action string) *cobra.Command {
	var endpoint, operator string
	short := "Delete the old endpoint although no verified delivery came on the new one"
	if action == workflows.RotationAbort {
		short = "Abort the rotation: delete the new endpoint and keep the old one"
	}
	cmd := &cobra.Command{
		Use:   action + " --endpoint ID",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStarter(cmd, false, func(s *starter.Starter) error {
				st, err := s.DecideRotation(cmd.Context(), endpoint, action, operator)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", workflows.SecretRotationID(endpoint), st.Step)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "id of the endpoint being rotated (the old one)")
	cmd.Flags().StringVar(&operator, "operator", defaultOperator(), "who is acting")
	_ = cmd.MarkFlagRequired("endpoint")
	return cmd
}
