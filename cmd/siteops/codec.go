package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/codec"
	"github.com/siteops/siteops/config"
)

// codecTokenEnv holds the codec server's bearer token (or use --token-file).
const codecTokenEnv = "SITEOPS_CODEC_TOKEN" //nolint:gosec // the name of a variable, not a token

func (c *cli) codecServerCmd() *cobra.Command {
	var addr, tokenFile string
	var origins, hosts []string
	var allowPlaintext, requireEncrypted bool
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
			if allowPlaintext && cmd.Flags().Changed("require-encrypted") && requireEncrypted {
				return usageError{errors.New("--require-encrypted and --allow-plaintext contradict each other; plaintext payloads are refused by default, so pass --allow-plaintext alone to return them")}
			}
			raw := os.Getenv("SITEOPS_PAYLOAD_KEY")
			if raw == "" {
				return errors.New("SITEOPS_PAYLOAD_KEY is not set; it must be the key the worker encrypts with")
			}
			keys, err := codec.ParseKeyRing(raw)
			if err != nil {
				return config.Invalid("%v", err)
			}
			token, err := codecToken(tokenFile)
			if err != nil {
				return err
			}
			cd, err := codec.NewRing(keys)
			if err != nil {
				return config.Invalid("%v", err)
			}
			logger, err := c.processLogger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("--addr %s cannot be listened on (%w); free the port or choose another address", addr, err)
			}
			if err := requireTokenBeyondLoopback(ln.Addr(), token); err != nil {
				_ = ln.Close()
				return err
			}
			allowed := append(codec.LocalHosts(ln.Addr().String()), hosts...)
			if h, _, err := net.SplitHostPort(addr); err == nil && h != "" && net.ParseIP(h) == nil {
				allowed = append(allowed, addr) // --addr by name, as its users will type it
			}
			h, err := codec.Handler(cd, codec.Options{Hosts: allowed, Origins: origins, Token: token, Logger: logger, AllowPlaintext: allowPlaintext})
			if err != nil {
				_ = ln.Close()
				return err
			}
			srv := codec.NewServer(h)
			go func() {
				<-cmd.Context().Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(ctx)
			}()
			auth := "no token"
			if token != "" {
				auth = "bearer token required"
			}
			plain := "plaintext payloads refused"
			if allowPlaintext {
				plain = "plaintext payloads returned as they are"
			}
			c.announce(cmd, map[string]any{"key_id": cd.KeyID(), "key_ids": cd.KeyIDs(), "url": "http://" + ln.Addr().String(),
				"hosts": allowed, "origins": origins, "token_required": token != "", "plaintext_allowed": allowPlaintext},
				"codec server for %s on http://%s (%s; %s; hosts %s)", keysLine(cd.KeyIDs()), ln.Addr(), auth, plain, strings.Join(allowed, ", "))
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8081", "listen address")
	cmd.Flags().StringArrayVar(&origins, "web-ui-origin", []string{"http://localhost:8233", "http://127.0.0.1:8233"}, "origin of a Web UI allowed to call it from the browser (repeatable; others get 403)")
	cmd.Flags().StringArrayVar(&hosts, "allowed-host", nil, "a further Host it is reached by, HOST:PORT or HOST for any port, e.g. behind a proxy (repeatable; localhost, 127.0.0.1 and [::1] on its port are always allowed)")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file holding the bearer token every request must carry (instead of "+codecTokenEnv+")")
	cmd.Flags().BoolVar(&allowPlaintext, "allow-plaintext", false, "return payloads that are not encrypted unchanged from /decode instead of refusing the request (histories written before the key was set, or by clients without it, then show)")
	// --require-encrypted was the opt-in before refusal became the default;
	// it is kept so that scripts passing it still run.
	cmd.Flags().BoolVar(&requireEncrypted, "require-encrypted", true, "plaintext payloads are refused by default now")
	_ = cmd.Flags().MarkDeprecated("require-encrypted", "plaintext payloads are refused by default; --allow-plaintext returns them as they are")
	return cmd
}

// requireTokenBeyondLoopback refuses a codec server without a token on an
// address other machines reach: its Host and Origin lists stop pages in a
// browser, but any other client writes the Host it likes, and would
// decrypt whatever it sends.
func requireTokenBeyondLoopback(addr net.Addr, token string) error {
	if tcp, ok := addr.(*net.TCPAddr); token != "" || (ok && tcp.IP.IsLoopback()) {
		return nil
	}
	return config.Invalid("codec-server refuses to listen on %s without a token: anyone who reaches it could decrypt payloads; set %s or --token-file, or listen on 127.0.0.1 (--addr 127.0.0.1:8081)", addr, codecTokenEnv)
}

// keysLine names the keys of the ring in the startup line: the first
// encrypts.
func keysLine(ids []string) string {
	if len(ids) == 1 {
		return "key " + ids[0]
	}
	return "keys " + ids[0] + " (encrypts), " + strings.Join(ids[1:], ", ")
}

// codecToken is the codec server's bearer token: SITEOPS_CODEC_TOKEN or
// the contents of --token-file, trimmed; empty when neither is set.
func codecToken(tokenFile string) (string, error) {
	env := strings.TrimSpace(os.Getenv(codecTokenEnv))
	if tokenFile == "" {
		if _, set := os.LookupEnv(codecTokenEnv); set && env == "" {
			return "", fmt.Errorf("%s is set but empty; unset it to run without a token, or make one with `openssl rand -base64 32`", codecTokenEnv)
		}
		return env, nil
	}
	if env != "" {
		return "", fmt.Errorf("both %s and --token-file are set; use one", codecTokenEnv)
	}
	b, err := os.ReadFile(tokenFile) // #nosec G304 -- the operator names the file
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("--token-file %s is empty; write a token into it, e.g. `openssl rand -base64 32 > %s`", tokenFile, tokenFile)
	}
	return token, nil
}
