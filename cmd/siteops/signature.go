package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/store"
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
			secrets, err := secretsFromEnv()
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
			header := webhook.Sign(secrets[0], ts, body)
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
			var secrets, names []string
			var err error
			if cmd.Flags().Changed("receiver") {
				secrets, names, err = storedSecrets(cmd, receiver)
			} else {
				secrets, err = secretsFromEnv()
			}
			if err != nil {
				return err
			}
			body, err := readBody(cmd, bodyPath)
			if err != nil {
				return err
			}
			idx, err := webhook.Verify(body, header, secrets, time.Now(), window)
			switch {
			case errors.Is(err, webhook.ErrNoValidSignature):
				holder := secretsEnv + " holds"
				if names != nil {
					holder = fmt.Sprintf("the secrets stored for receiver %s hold", store.ReceiverName(receiver))
				}
				return fmt.Errorf("%w; check that the body is byte for byte what was received (no proxy re-encoding), and that %s this endpoint's secret", err, holder)
			case errors.Is(err, webhook.ErrTimestampOutsideWindow):
				return fmt.Errorf("%w; a replayed delivery, or a clock to fix (use --window to widen the check for an old capture)", err)
			case err != nil:
				return err
			}
			fp := agentsite.NewSigningSecret(secrets[idx]).Fingerprint()
			out, which := map[string]any{"valid": true, "secret": idx + 1, "of": len(secrets), "fingerprint": fp}, ""
			if names != nil {
				out["endpoint_id"], which = names[idx], ", endpoint "+names[idx]
			}
			return c.say(cmd, out, "valid: signed with secret %d of %d (fingerprint %s%s)", idx+1, len(secrets), fp, which)
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

func secretsFromEnv() ([]string, error) {
	var secrets []string
	for s := range strings.SplitSeq(os.Getenv(secretsEnv), ",") {
		if s = strings.TrimSpace(s); s != "" {
			secrets = append(secrets, s)
		}
	}
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%s is empty; set it to the endpoint's whsec_ secret (comma-separate several)", secretsEnv)
	}
	return secrets, nil
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

// storedSecrets reads the active secrets stored for an ingress receiver and
// the endpoint each belongs to.
// It opens the store read-only: a check creates no database and migrates
// none.
func storedSecrets(cmd *cobra.Command, receiver string) (secrets, endpoints []string, err error) {
	if receiver == store.ReceiverName("") {
		receiver = ""
	}
	var db config.Database
	if err := config.Load(&db); err != nil {
		return nil, nil, err
	}
	if db.SecretKey == "" {
		return nil, nil, usageError{fmt.Errorf("SITEOPS_SECRET_KEY is not set, and the secrets stored for receiver %s are encrypted with it: set it to the key the worker and the ingress use, or verify with %s instead of --receiver",
			store.ReceiverName(receiver), secretsEnv)}
	}
	st, _, err := wiring.InspectStore(cmd.Context(), db)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = st.Close() }()
	set, err := st.ActiveSecrets(cmd.Context(), receiver)
	if err != nil {
		return nil, nil, err
	}
	for i, sec := range set.Secrets {
		secrets = append(secrets, sec.Reveal())
		endpoints = append(endpoints, set.Infos[i].EndpointID)
	}
	if len(secrets) == 0 {
		msg := fmt.Sprintf("no active secret is stored for receiver %s", store.ReceiverName(receiver))
		if len(set.Unreadable) > 0 {
			msg += fmt.Sprintf(" that decrypts with SITEOPS_SECRET_KEY (%d do not; see `siteops doctor`)", len(set.Unreadable))
		}
		return nil, nil, fmt.Errorf("%s: %w", msg, store.ErrNotFound)
	}
	return secrets, endpoints, nil
}
