package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/ingress"
	"github.com/siteops/siteops/wiring"
)

// secretsEnv names the variable the signature commands read secrets from,
// the same one the ingress uses for POST /webhooks.
const secretsEnv = "SITEOPS_WEBHOOK_SECRETS" //nolint:gosec // the name of a variable, not a credential

func (c *cli) signatureCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "signature",
		Short: "Sign or verify a webhook body the way the Agent-Site service does",
		Long: `Sign or verify a webhook body the way the Agent-Site service does.

Secrets are read from ` + secretsEnv + ` (comma-separated), never from flags,
so that they stay out of shell history and process lists; 'verify --receiver
NAME' uses the secrets stored for that ingress receiver instead (with
SITEOPS_SECRET_KEY and SITEOPS_DATABASE_URL).`,
		Args: cobra.ArbitraryArgs,
		RunE: groupRunE,
	}
	cmd.AddCommand(c.signCmd(), c.verifyCmd())
	return cmd
}

func (c *cli) signCmd() *cobra.Command {
	var bodyPath string
	var at int64
	cmd := &cobra.Command{
		Use:   "sign --body FILE [--time UNIX]",
		Short: "Print the svc-signature header for a body, signed with the first secret",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			secrets, err := envSecrets()
			if err != nil {
				return err
			}
			body, err := readBody(cmd, bodyPath)
			if err != nil {
				return err
			}
			ts := time.Now()
			if at != 0 {
				ts = time.Unix(at, 0)
			}
			header := webhook.Sign(secrets.Secrets[0], ts, body)
			return c.say(cmd, map[string]string{"svc-signature": header}, "%s", header)
		},
	}
	cmd.Flags().StringVar(&bodyPath, "body", "", "file with the exact raw body (- for standard input)")
	cmd.Flags().Int64Var(&at, "time", 0, "Unix time to sign at (default now)")
	_ = cmd.MarkFlagRequired("body")
	return cmd
}

func (c *cli) verifyCmd() *cobra.Command {
	var bodyPath, header, receiver string
	var window time.Duration
	cmd := &cobra.Command{
		Use:   "verify --body FILE --header 't=...,v1=...' [--receiver NAME]",
		Short: "Check a delivery's svc-signature header against the configured or stored secrets",
		Long: `Check a captured delivery's svc-signature header against the secrets in
` + secretsEnv + `, or with --receiver NAME against the active secrets stored for
that ingress receiver ("default" for POST /webhooks), exactly as the ingress
verifies it. Only fingerprints are printed, never secrets.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var secrets ingress.CaptureSecrets
			var err error
			if cmd.Flags().Changed("receiver") {
				secrets, err = wiring.ReceiverSecretsFromEnv(cmd.Context(), receiver)
			} else {
				secrets, err = envSecrets()
			}
			if err != nil {
				return err
			}
			body, err := readBody(cmd, bodyPath)
			if err != nil {
				return err
			}
			res, err := ingress.CheckCapture(body, header, secrets, time.Now(), window)
			if err != nil {
				return err
			}
			which := ""
			if res.EndpointID != "" {
				which = ", endpoint " + res.EndpointID
			}
			return c.say(cmd, res, "valid: signed with secret %d of %d (fingerprint %s%s)", res.Secret, res.Of, res.Fingerprint, which)
		},
	}
	cmd.Flags().StringVar(&bodyPath, "body", "", "file with the exact raw body (- for standard input)")
	cmd.Flags().StringVar(&header, "header", "", "the svc-signature header value")
	cmd.Flags().DurationVar(&window, "window", webhook.DefaultWindow, "replay window")
	cmd.Flags().StringVar(&receiver, "receiver", "", "verify with the secrets stored for this ingress receiver (default for POST /webhooks)")
	_ = cmd.MarkFlagRequired("body")
	_ = cmd.MarkFlagRequired("header")
	return cmd
}

// envSecrets are the secrets of SITEOPS_WEBHOOK_SECRETS, read as the
// ingress reads them.
func envSecrets() (ingress.CaptureSecrets, error) {
	secrets := wiring.SplitSecrets(os.Getenv(secretsEnv))
	if len(secrets) == 0 {
		return ingress.CaptureSecrets{}, fmt.Errorf("%s is empty; set it to the endpoint's whsec_ secret (comma-separate several)", secretsEnv)
	}
	return ingress.CaptureSecrets{Secrets: secrets}, nil
}

func readBody(cmd *cobra.Command, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(cmd.InOrStdin())
	}
	b, err := os.ReadFile(path) //nolint:gosec // reading the file the operator named is the point
	if err != nil {
		return nil, fmt.Errorf("reading the body: %w", err)
	}
	return b, nil
}
