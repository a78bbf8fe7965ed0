package main

import (
	"errors"
	"strings"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/wiring"
)

func (c *cli) codecServerCmd() *cobra.Command {
	var cfg wiring.CodecConfig
	var requireEncrypted bool
	cmd := &cobra.Command{
		Use:   "codec-server",
		Short: "Decode encrypted payloads for the Temporal Web UI (SITEOPS_PAYLOAD_KEY)",
		Long: `Serve the Temporal codec-server protocol (POST /encode, POST /decode) with the
key in SITEOPS_PAYLOAD_KEY, so that people who hold the key can read workflow
inputs and results in the Temporal Web UI (Settings → Codec Server, or
'temporal server start-dev --ui-codec-endpoint') or with
'temporal workflow show --codec-endpoint'. SITEOPS_PAYLOAD_KEY may be a key
ring, "<new>,<old>,...": /encode encrypts with the first key, /decode uses
whichever key a payload names; give it the ring the workers have.

It decrypts for whoever it serves, so it serves only:
  - requests whose Host is localhost, 127.0.0.1 or [::1] on its port, the
    --addr it listens on, or an --allowed-host (others get 403: this is what
    stops a DNS-rebinding page in your browser);
  - from a browser, pages of a --web-ui-origin (scheme://host:port, as the
    address bar shows the Web UI); other origins get 403;
  - JSON bodies (Content-Type: application/json, else 415) up to 8 MiB (413)
    that arrive within 10s (408);
  - requests naming their namespace in X-Namespace (else 400), as the Web UI
    and 'temporal --codec-endpoint' do;
  - when SITEOPS_CODEC_TOKEN or --token-file sets a token, requests with
    "Authorization: Bearer <token>" (else 401): the CLI sends it with
    --codec-auth "Bearer <token>". The Web UI's passAccessToken forwards the
    UI's own login token instead, so with a token set the UI reaches the codec
    server only through a proxy that checks that login token and sends this one.
Refusals are logged with what was refused. The Host and Origin lists stop
pages in a browser only: any other client writes the Host and Origin it
likes. So without a token it listens on loopback only, and refuses to start
on any other address until SITEOPS_CODEC_TOKEN or --token-file sets one.

/encode binds payloads to the namespace the request names (X-Namespace, as
the Web UI and the CLI send it), and /decode refuses a payload written for
another namespace. /decode also refuses a payload that is not encrypted:
nobody who holds the key wrote it (a workflow started through Temporal's
HTTP API, a history written before the key was set), and the Web UI then
shows it as it is instead of as if the key vouched for it. --allow-plaintext
returns such payloads unchanged instead. (The worker itself still reads
plaintext input: callers without the key send it.)`,
		Example: "  SITEOPS_PAYLOAD_KEY=... siteops codec-server --addr 127.0.0.1:8081 --web-ui-origin http://localhost:8233\n" +
			"  temporal server start-dev --ui-codec-endpoint http://127.0.0.1:8081\n" +
			"  SITEOPS_CODEC_TOKEN=$(openssl rand -base64 32) siteops codec-server --addr 127.0.0.1:8081\n" +
			"  temporal workflow show -w onboarding/bayside-dental --codec-endpoint http://127.0.0.1:8081 --codec-auth \"Bearer $SITEOPS_CODEC_TOKEN\"",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.AllowPlaintext && cmd.Flags().Changed("require-encrypted") && requireEncrypted {
				return usageError{errors.New("--require-encrypted and --allow-plaintext contradict each other; plaintext payloads are refused by default, so pass --allow-plaintext alone to return them")}
			}
			if err := config.Load(&cfg); err != nil {
				return err
			}
			logger, err := c.processLogger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			srv, err := wiring.ListenCodec(cfg, logger)
			if err != nil {
				return err
			}
			in, auth, plain := srv.Info, "no token", "plaintext payloads refused"
			if in.TokenRequired {
				auth = "bearer token required"
			}
			if in.PlaintextAllowed {
				plain = "plaintext payloads returned as they are"
			}
			c.announce(cmd, in, "codec server for %s on %s (%s; %s; hosts %s)", keysLine(in.KeyIDs), in.URL, auth, plain, strings.Join(in.Hosts, ", "))
			return srv.Serve(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&cfg.Addr, "addr", "127.0.0.1:8081", "listen address")
	cmd.Flags().StringArrayVar(&cfg.Origins, "web-ui-origin", []string{"http://localhost:8233", "http://127.0.0.1:8233"}, "origin of a Web UI allowed to call it from the browser (repeatable; others get 403)")
	cmd.Flags().StringArrayVar(&cfg.Hosts, "allowed-host", nil, "a further Host it is reached by, HOST:PORT or HOST for any port, e.g. behind a proxy (repeatable; localhost, 127.0.0.1 and [::1] on its port are always allowed)")
	cmd.Flags().StringVar(&cfg.TokenFile, "token-file", "", "file holding the bearer token every request must carry (instead of "+wiring.CodecTokenEnv+")")
	cmd.Flags().BoolVar(&cfg.AllowPlaintext, "allow-plaintext", false, "return payloads that are not encrypted unchanged from /decode instead of refusing the request (histories written before the key was set, or by clients without it, then show)")
	// --require-encrypted was the opt-in before refusal became the default;
	// it is kept so that scripts passing it still run.
	cmd.Flags().BoolVar(&requireEncrypted, "require-encrypted", true, "plaintext payloads are refused by default now")
	_ = cmd.Flags().MarkDeprecated("require-encrypted", "plaintext payloads are refused by default; --allow-plaintext returns them as they are")
	return cmd
}

// keysLine names the keys of the ring in the startup line: the first
// encrypts.
func keysLine(ids []string) string {
	if len(ids) == 1 {
		return "key " + ids[0]
	}
	return "keys " + ids[0] + " (encrypts), " + strings.Join(ids[1:], ", ")
}
