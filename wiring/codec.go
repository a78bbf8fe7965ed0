package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/siteops/siteops/codec"
	"github.com/siteops/siteops/config"
)

// CodecTokenEnv holds the codec server's bearer token (or give a
// TokenFile).
const CodecTokenEnv = "SITEOPS_CODEC_TOKEN" //nolint:gosec // the name of a variable, not a token

// CodecConfig is everything a codec server process reads: the key ring
// and the token from the environment, the rest from its flags.
type CodecConfig struct {
	// PayloadKey is the key ring the workers encrypt with: one key, or
	// "<new>,<old>,...".
	PayloadKey string `envconfig:"SITEOPS_PAYLOAD_KEY"`
	// Token is CodecTokenEnv: nil when it is unset, refused when it is set
	// but empty.
	Token *string `envconfig:"SITEOPS_CODEC_TOKEN"`
	// TokenFile holds the token instead of CodecTokenEnv.
	TokenFile string `ignored:"true"`
	// Addr is the address to listen on.
	Addr string `ignored:"true"`
	// Hosts are further Host names it is reached by (HOST:PORT, or HOST
	// for any port); its loopback names on its port always are.
	Hosts []string `ignored:"true"`
	// Origins are the Web UI origins whose pages may call it.
	Origins []string `ignored:"true"`
	// AllowPlaintext returns payloads that are not encrypted unchanged
	// from /decode instead of refusing the request.
	AllowPlaintext bool `ignored:"true"`
}

// CodecInfo says what a codec server serves, as it starts.
type CodecInfo struct {
	Hosts   []string `json:"hosts"`
	KeyID   string   `json:"key_id"` // the key /encode encrypts with
	KeyIDs  []string `json:"key_ids"`
	Origins []string `json:"origins"`
	// PlaintextAllowed says /decode returns payloads that are not
	// encrypted as they are; TokenRequired that every request needs the
	// bearer token.
	PlaintextAllowed bool   `json:"plaintext_allowed"`
	TokenRequired    bool   `json:"token_required"`
	URL              string `json:"url"`
}

// CodecServer is siteops' codec server for the Temporal Web UI and CLI,
// listening.
type CodecServer struct {
	Info CodecInfo
	ln   net.Listener
	srv  *http.Server
}

// ListenCodec checks cfg, makes the codec server's handler and listens on
// cfg.Addr. It refuses, before it serves anything, a key ring that does
// not read, a token that is set but empty or given twice, and no token on
// an address other machines reach: the Host and Origin lists stop pages in
// a browser, but any other client writes the Host it likes and would
// decrypt whatever it sends.
func ListenCodec(cfg CodecConfig, logger *slog.Logger) (*CodecServer, error) {
	if cfg.PayloadKey == "" {
		return nil, errors.New("SITEOPS_PAYLOAD_KEY is not set; it must be the key the worker encrypts with")
	}
	keys, err := codec.ParseKeyRing(cfg.PayloadKey)
	if err != nil {
		return nil, config.Invalid("%v", err)
	}
	token, err := codecToken(cfg.Token, cfg.TokenFile)
	if err != nil {
		return nil, err
	}
	cd, err := codec.New(codec.Options{Keys: keys})
	if err != nil {
		return nil, config.Invalid("%v", err)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("--addr %s cannot be listened on (%w); free the port or choose another address", cfg.Addr, err)
	}
	if err := requireTokenBeyondLoopback(ln.Addr(), token); err != nil {
		_ = ln.Close()
		return nil, err
	}
	allowed := append(codec.LocalHosts(ln.Addr().String()), cfg.Hosts...)
	if h, _, err := net.SplitHostPort(cfg.Addr); err == nil && h != "" && net.ParseIP(h) == nil {
		allowed = append(allowed, cfg.Addr) // the address by name, as its users will type it
	}
	h, err := codec.NewHandler(codec.HandlerOptions{Codec: cd, Hosts: allowed, Origins: cfg.Origins, Token: token, Logger: logger, AllowPlaintext: cfg.AllowPlaintext})
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	return &CodecServer{
		Info: CodecInfo{Hosts: allowed, KeyID: cd.KeyID(), KeyIDs: cd.KeyIDs(), Origins: cfg.Origins,
			PlaintextAllowed: cfg.AllowPlaintext, TokenRequired: token != "", URL: "http://" + ln.Addr().String()},
		ln: ln, srv: codec.NewServer(h),
	}, nil
}

// Serve serves until ctx ends, then lets the requests in flight finish
// for up to 5 s.
func (s *CodecServer) Serve(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		// ctx is over: the shutdown gets a deadline of its own.
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.srv.Shutdown(shut)
	}()
	if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// requireTokenBeyondLoopback refuses a codec server without a token on an
// address other machines reach.
func requireTokenBeyondLoopback(addr net.Addr, token string) error {
	if tcp, ok := addr.(*net.TCPAddr); token != "" || (ok && tcp.IP.IsLoopback()) {
		return nil
	}
	return config.Invalid("codec-server refuses to listen on %s without a token: anyone who reaches it could decrypt payloads; set %s or --token-file, or listen on 127.0.0.1 (--addr 127.0.0.1:8081)", addr, CodecTokenEnv)
}

// codecToken is the codec server's bearer token: the variable's value (nil
// when unset) or the contents of file, trimmed; empty when neither is set.
func codecToken(env *string, file string) (string, error) {
	var value string
	if env != nil {
		value = strings.TrimSpace(*env)
	}
	if file == "" {
		if env != nil && value == "" {
			return "", fmt.Errorf("%s is set but empty; unset it to run without a token, or make one with `openssl rand -base64 32`", CodecTokenEnv)
		}
		return value, nil
	}
	if value != "" {
		return "", fmt.Errorf("both %s and --token-file are set; use one", CodecTokenEnv)
	}
	b, err := os.ReadFile(file) // #nosec G304 -- the operator names the file
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("--token-file %s is empty; write a token into it, e.g. `openssl rand -base64 32 > %s`", file, file)
	}
	return token, nil
}
