// Package config reads siteops' configuration from the environment with
// envconfig, validates it at start, and fails with a message that names the
// variable and the fix. Secrets have no defaults and are never printed.
package config

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"log/slog"

	"github.com/kelseyhightower/envconfig"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/siteops/siteops/codec"
	"github.com/siteops/siteops/internal/telemetry"
)

// Temporal is how to reach Temporal.
type Temporal struct {
	Address   string `envconfig:"TEMPORAL_ADDRESS" default:"localhost:7233"`
	Namespace string `envconfig:"TEMPORAL_NAMESPACE" default:"default"`
	TaskQueue string `envconfig:"SITEOPS_TASK_QUEUE" default:"siteops"`
	// PayloadKey, when set, encrypts every Temporal payload (base64 of 32
	// bytes); every siteops process talking to the namespace needs it.
	PayloadKey string `envconfig:"SITEOPS_PAYLOAD_KEY"`
}

// AgentSite is how to reach the Agent-Site API.
type AgentSite struct {
	BaseURL string `envconfig:"AGENTSITE_BASE_URL"`
	APIKey  string `envconfig:"AGENTSITE_API_KEY"`
}

// Database names the store.
type Database struct {
	URL string `envconfig:"SITEOPS_DATABASE_URL" default:"sqlite://siteops.db"`
	// SecretKey is the base64 of 32 bytes that encrypt stored signing
	// secrets.
	SecretKey string `envconfig:"SITEOPS_SECRET_KEY"`
}

// Ingress configures the webhook receiver.
type Ingress struct {
	Addr           string        `envconfig:"SITEOPS_INGRESS_ADDR" default:":8088"`
	WebhookSecrets string        `envconfig:"SITEOPS_WEBHOOK_SECRETS"`
	ReplayWindow   time.Duration `envconfig:"SITEOPS_REPLAY_WINDOW" default:"300s"`
}

// Load fills spec (a pointer to one of the structs above, or a struct that
// embeds several) from the environment.
func Load(spec any) error {
	if err := envconfig.Process("", spec); err != nil {
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			return fmt.Errorf("%s=%q is not a valid %s; fix the variable and start again", pe.KeyName, pe.Value, pe.TypeName)
		}
		return err
	}
	return nil
}

// Validate checks the Temporal settings.
func (t Temporal) Validate() error {
	if t.Address == "" || !strings.Contains(t.Address, ":") {
		return fmt.Errorf("TEMPORAL_ADDRESS=%q must be HOST:PORT, e.g. localhost:7233", t.Address)
	}
	if t.Namespace == "" {
		return errors.New("TEMPORAL_NAMESPACE is empty; use default or your namespace")
	}
	if t.TaskQueue == "" {
		return errors.New("SITEOPS_TASK_QUEUE is empty; use siteops or your queue name")
	}
	return nil
}

// Validate checks the Agent-Site settings without printing the key.
func (a AgentSite) Validate() error {
	if a.BaseURL == "" {
		return errors.New("AGENTSITE_BASE_URL is not set; set it to the API's base URL, e.g. https://api.example.com (the client adds /api/v1)")
	}
	if a.APIKey == "" {
		return errors.New("AGENTSITE_API_KEY is not set; set it to a key with the scopes siteops needs (it is never logged)")
	}
	return nil
}

// Key decodes SecretKey; nil when it is unset.
func (d Database) Key() ([]byte, error) {
	if d.SecretKey == "" {
		return nil, nil
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(d.SecretKey))
	if err != nil || len(key) != 32 {
		return nil, errors.New("SITEOPS_SECRET_KEY must be 32 random bytes in base64; make one with `openssl rand -base64 32`")
	}
	return key, nil
}

// ClientOptions are the Temporal client options of a siteops process: the
// address, the SDK logging through logger, the payload codec when
// SITEOPS_PAYLOAD_KEY is set, and tracing and metrics when tel is given.
func (t Temporal) ClientOptions(logger *slog.Logger, tel *telemetry.Telemetry) (client.Options, error) {
	if err := t.Validate(); err != nil {
		return client.Options{}, err
	}
	o := client.Options{HostPort: t.Address, Namespace: t.Namespace, Logger: tlog.NewStructuredLogger(logger)}
	if t.PayloadKey != "" {
		key, err := codec.ParseKey(t.PayloadKey)
		if err != nil {
			return o, err
		}
		c, err := codec.New(key)
		if err != nil {
			return o, err
		}
		o.DataConverter = c.DataConverter()
	}
	tel.ClientOptions(&o)
	return o, nil
}

// Dial connects to Temporal. It fails with a message naming
// TEMPORAL_ADDRESS when the server cannot be reached.
func (t Temporal) Dial(ctx context.Context, logger *slog.Logger, tel *telemetry.Telemetry) (client.Client, error) {
	o, err := t.ClientOptions(logger, tel)
	if err != nil {
		return nil, err
	}
	c, err := client.DialContext(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s (namespace %s): %w; is it running? set TEMPORAL_ADDRESS", t.Address, t.Namespace, err)
	}
	return c, nil
}

// LazyClient returns a client that connects on first use, so that a process
// can start while Temporal is unreachable.
func (t Temporal) LazyClient(logger *slog.Logger, tel *telemetry.Telemetry) (client.Client, error) {
	o, err := t.ClientOptions(logger, tel)
	if err != nil {
		return nil, err
	}
	return client.NewLazyClient(o)
}
