package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	tlog "go.temporal.io/sdk/log"

	"github.com/siteops/siteops/codec"
	"github.com/siteops/siteops/config"
	sitenexus "github.com/siteops/siteops/nexus"
	"github.com/siteops/siteops/telemetry"
)

// Default Temporal address and namespace, as the temporal CLI has them.
const (
	DefaultTemporalAddress   = "localhost:7233"
	DefaultTemporalNamespace = "default"
)

// TemporalEnvironment lists the variables the SDK's loader reads for the
// Temporal connection, as the temporal CLI does (TEMPORAL_GRPC_META_* adds
// gRPC headers).
var TemporalEnvironment = []string{
	"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY", "TEMPORAL_TLS",
	"TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_CERT_DATA", "TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_CLIENT_KEY_DATA",
	"TEMPORAL_TLS_SERVER_CA_CERT_PATH", "TEMPORAL_TLS_SERVER_CA_CERT_DATA", "TEMPORAL_TLS_SERVER_NAME", "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION",
	"TEMPORAL_CLIENT_AUTHORITY", "TEMPORAL_PROFILE", "TEMPORAL_CONFIG_FILE",
}

// Connection describes how a process reaches Temporal, for logs and
// messages. It never holds a key or a certificate.
type Connection struct {
	Address   string
	Namespace string
	Profile   string // "" when no profile was asked for
	TLS       bool
	ClientTLS bool // a client certificate is presented (mutual TLS)
	APIKey    bool
}

func (c Connection) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s namespace %s", c.Address, c.Namespace)
	switch {
	case c.ClientTLS:
		b.WriteString(" (mutual TLS")
	case c.TLS:
		b.WriteString(" (TLS")
	default:
		b.WriteString(" (plaintext")
	}
	if c.APIKey {
		b.WriteString(", API key")
	}
	b.WriteString(")")
	return b.String()
}

// TemporalOptions builds the Temporal client options of a siteops process.
// The connection is read by the SDK's own loader (go.temporal.io/sdk/contrib/envconfig)
// exactly as the temporal CLI reads it — TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
// TEMPORAL_API_KEY, TEMPORAL_TLS*, TEMPORAL_PROFILE and TEMPORAL_CONFIG_FILE
// profiles — and t's Address, Namespace and Profile (from flags) win over
// them. On top come the SDK's logging through logger, the payload codec when
// SITEOPS_PAYLOAD_KEY is set, small signals and activity completions sent
// without gzip (compressOnlyWhereItPays), and tracing and metrics when tel
// is given.
func TemporalOptions(t config.Temporal, logger *slog.Logger, tel *telemetry.Telemetry) (client.Options, Connection, error) {
	return temporalOptions(t, nonEmptyEnv{}, logger, tel)
}

// nonEmptyEnv reads the process environment treating an empty variable as
// unset, as the loader's documentation says ("set and non-empty"): an
// exported TEMPORAL_ADDRESS= does not hide the profile's address.
type nonEmptyEnv struct{}

func (nonEmptyEnv) Environ() []string { return os.Environ() }

func (nonEmptyEnv) LookupEnv(key string) (string, bool) {
	v, ok := os.LookupEnv(key)
	return v, ok && v != ""
}

func temporalOptions(t config.Temporal, env envconfig.EnvLookup, logger *slog.Logger, tel *telemetry.Telemetry) (client.Options, Connection, error) {
	if err := t.Validate(); err != nil {
		return client.Options{}, Connection{}, err
	}
	prof, err := envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{ConfigFileProfile: t.Profile, EnvLookup: env})
	if err != nil {
		return client.Options{}, Connection{}, profileError(t.Profile, env, err)
	}
	if t.Address != "" {
		prof.Address = t.Address
	}
	if t.Namespace != "" {
		prof.Namespace = t.Namespace
	}
	if prof.Address == "" {
		prof.Address = DefaultTemporalAddress
	}
	if prof.Namespace == "" {
		prof.Namespace = DefaultTemporalNamespace
	}
	if !strings.Contains(prof.Address, ":") {
		return client.Options{}, Connection{}, config.Invalid("%s=%q must be HOST:PORT, e.g. localhost:7233", setting(env, "TEMPORAL_ADDRESS", "address"), prof.Address)
	}
	if err := checkTLSFiles(prof.TLS, env); err != nil {
		return client.Options{}, Connection{}, err
	}
	o, err := prof.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return client.Options{}, Connection{}, config.Invalid("the Temporal TLS settings cannot be used: %v; check the TEMPORAL_TLS_* variables (or the tls section of your temporal.toml profile)", err)
	}
	conn := Connection{
		Address: prof.Address, Namespace: prof.Namespace, Profile: t.Profile,
		TLS: o.ConnectionOptions.TLS != nil, APIKey: prof.APIKey != "",
		ClientTLS: o.ConnectionOptions.TLS != nil && len(o.ConnectionOptions.TLS.Certificates) > 0,
	}
	if logger != nil {
		o.Logger = tlog.NewStructuredLogger(logger)
	}
	if t.Identity != "" {
		o.Identity = t.Identity
	}
	if t.PayloadKey != "" {
		keys, err := codec.ParseKeyRing(t.PayloadKey)
		if err != nil {
			return client.Options{}, conn, config.Invalid("%v", err)
		}
		// Payloads are bound to the namespace they are written in, so that
		// one copied into another namespace's history does not decode there.
		// The Nexus service's answers are written in plaintext,
		// authenticated: its callers do not hold the key.
		c, err := codec.New(codec.Options{Keys: keys, Namespace: prof.Namespace, Plaintext: sitenexus.Plaintext()})
		if err != nil {
			return client.Options{}, conn, err
		}
		o.DataConverter = c.DataConverter()
	}
	compressOnlyWhereItPays(&o)
	tel.ClientOptions(&o)
	return o, conn, nil
}

// DialTemporal connects to Temporal with the options of t. Its errors are
// one line that names the setting to fix: the address, the CA, the client
// certificate and key, or the API key.
func DialTemporal(ctx context.Context, t config.Temporal, logger *slog.Logger, tel *telemetry.Telemetry) (client.Client, Connection, error) {
	o, conn, err := TemporalOptions(t, logger, tel)
	if err != nil {
		return nil, conn, err
	}
	c, err := Dial(ctx, o, conn)
	return c, conn, err
}

// Dial connects with options that TemporalOptions built, for a caller
// that needs them too (the starter reads payloads back with their data
// converter; a process says where it connects before it dials). Its
// errors read as DialError's, and keep the SDK's error beneath for
// errors.As, so that a caller can tell a server that is unavailable
// (worth another try) from one that refused.
func Dial(ctx context.Context, o client.Options, conn Connection) (client.Client, error) {
	c, err := client.DialContext(ctx, o)
	if err != nil {
		return nil, dialFailure{explained: DialError(conn, err), cause: err}
	}
	return c, nil
}

// dialFailure is DialError's explanation with the SDK's error beneath.
type dialFailure struct{ explained, cause error }

func (e dialFailure) Error() string   { return e.explained.Error() }
func (e dialFailure) Unwrap() []error { return []error{e.explained, e.cause} }

// LazyTemporal returns a client that connects on first use, so that a
// process can start while Temporal is unreachable.
func LazyTemporal(t config.Temporal, logger *slog.Logger, tel *telemetry.Telemetry) (client.Client, Connection, error) {
	o, conn, err := TemporalOptions(t, logger, tel)
	if err != nil {
		return nil, conn, err
	}
	c, err := client.NewLazyClient(o)
	return c, conn, err
}

// ErrTemporalUnreachable marks a Temporal server that could not be
// reached; ErrTemporalAuth one that refused the credentials.
var (
	ErrTemporalUnreachable = errors.New("temporal unreachable")
	ErrTemporalAuth        = errors.New("temporal refused the credentials")
)

// DialError explains a failed connection to Temporal in one line that
// names the setting to fix. It wraps ErrTemporalUnreachable or
// ErrTemporalAuth.
func DialError(conn Connection, err error) error {
	msg := err.Error()
	at := fmt.Sprintf("Temporal at %s", conn.Address)
	switch {
	case strings.Contains(msg, "certificate signed by unknown authority"), strings.Contains(msg, "failed to verify certificate"):
		return fmt.Errorf("%w: %s presented a certificate that TEMPORAL_TLS_SERVER_CA_CERT_PATH (or the system roots) does not trust; set it to the CA that signed the server's certificate, or TEMPORAL_TLS_SERVER_NAME if the name differs", ErrTemporalAuth, at)
	case strings.Contains(msg, "certificate required"), strings.Contains(msg, "bad certificate"), strings.Contains(msg, "unknown certificate authority"):
		if conn.ClientTLS {
			return fmt.Errorf("%w: %s refused the client certificate in TEMPORAL_TLS_CLIENT_CERT_PATH; use a certificate signed by a CA the server trusts", ErrTemporalAuth, at)
		}
		return fmt.Errorf("%w: %s asks for a client certificate: set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH", ErrTemporalAuth, at)
	case conn.TLS && (strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset") || strings.Contains(msg, "EOF")):
		// Under TLS 1.3 a server judges the client certificate after the
		// handshake: the client sees the connection drop.
		if conn.ClientTLS {
			return fmt.Errorf("%w: %s closed the TLS connection after the handshake, as a server does with a client certificate it does not trust: check TEMPORAL_TLS_CLIENT_CERT_PATH (a certificate signed by a CA the server trusts)", ErrTemporalAuth, at)
		}
		return fmt.Errorf("%w: %s closed the TLS connection, as a server that requires mutual TLS does without a client certificate: set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH", ErrTemporalAuth, at)
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return fmt.Errorf("%w: %s does not speak TLS; unset TEMPORAL_TLS (an API key turns TLS on unless TEMPORAL_TLS=false)", ErrTemporalUnreachable, at)
	case conn.APIKey && (strings.Contains(msg, "Unauthenticated") || strings.Contains(msg, "PermissionDenied") || strings.Contains(msg, "code = Unauthenticated") || strings.Contains(msg, "code = PermissionDenied")):
		return fmt.Errorf("%w: %s refused TEMPORAL_API_KEY for namespace %s; check the key and its namespace access", ErrTemporalAuth, at, conn.Namespace)
	case strings.Contains(msg, "code = Unauthenticated"), strings.Contains(msg, "code = PermissionDenied"):
		return fmt.Errorf("%w: %s refused the connection to namespace %s (%s); set TEMPORAL_API_KEY or the TEMPORAL_TLS_CLIENT_* certificate", ErrTemporalAuth, at, conn.Namespace, lastPart(msg))
	case strings.Contains(msg, "Namespace") && strings.Contains(msg, "not found"):
		return fmt.Errorf("%w: %s has no namespace %s; create it (deploy/temporal-setup.sh) or set TEMPORAL_NAMESPACE", ErrTemporalUnreachable, at, conn.Namespace)
	case !conn.TLS && (strings.Contains(msg, "server preface") || strings.Contains(msg, "connection reset")):
		return fmt.Errorf("%w: %s closed the plaintext connection; if it needs TLS set TEMPORAL_TLS=true (Temporal Cloud also needs TEMPORAL_API_KEY or a client certificate)", ErrTemporalUnreachable, at)
	}
	return fmt.Errorf("%w: cannot reach %s (namespace %s): %s; is it running? set TEMPORAL_ADDRESS or --address", ErrTemporalUnreachable, at, conn.Namespace, lastPart(msg))
}

// lastPart keeps the innermost cause of a gRPC error, which is the part a
// person can act on.
func lastPart(msg string) string {
	if i := strings.LastIndex(msg, "desc = "); i >= 0 {
		msg = msg[i+len("desc = "):]
	}
	return strings.Trim(strings.ReplaceAll(msg, "\n", " "), `" `)
}

// setting names where a value came from: the environment variable when it
// is set, otherwise the key in the temporal.toml profile.
func setting(env envconfig.EnvLookup, envName, tomlKey string) string {
	if v, ok := env.LookupEnv(envName); ok && v != "" {
		return envName
	}
	return fmt.Sprintf("%s (%s in the temporal.toml profile)", envName, tomlKey)
}

// checkTLSFiles checks that the TLS files named exist and are readable,
// so that a wrong path fails with the setting's name rather than deep in a
// handshake.
func checkTLSFiles(tls *envconfig.ClientConfigTLS, env envconfig.EnvLookup) error {
	if tls == nil || tls.Disabled {
		return nil
	}
	for _, f := range []struct{ path, env, key, what string }{
		{tls.ClientCertPath, "TEMPORAL_TLS_CLIENT_CERT_PATH", "tls.client_cert_path", "the client certificate (PEM)"},
		{tls.ClientKeyPath, "TEMPORAL_TLS_CLIENT_KEY_PATH", "tls.client_key_path", "the client certificate's private key (PEM)"},
		{tls.ServerCACertPath, "TEMPORAL_TLS_SERVER_CA_CERT_PATH", "tls.server_ca_cert_path", "the CA that signed the server's certificate (PEM)"},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return config.Invalid("%s=%s cannot be read (%s); set it to %s", setting(env, f.env, f.key), f.path, statReason(err), f.what)
		}
	}
	hasCert := tls.ClientCertPath != "" || len(tls.ClientCertData) > 0
	hasKey := tls.ClientKeyPath != "" || len(tls.ClientKeyData) > 0
	switch {
	case hasCert && !hasKey:
		return config.Invalid("a client certificate is set but no key; set %s to the certificate's private key (PEM)", setting(env, "TEMPORAL_TLS_CLIENT_KEY_PATH", "tls.client_key_path"))
	case hasKey && !hasCert:
		return config.Invalid("a client key is set but no certificate; set %s to the client certificate (PEM)", setting(env, "TEMPORAL_TLS_CLIENT_CERT_PATH", "tls.client_cert_path"))
	}
	return nil
}

func statReason(err error) string {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "no such file"
	case errors.Is(err, os.ErrPermission):
		return "permission denied"
	}
	return "unreadable"
}

// profileError explains a profile that could not be loaded.
func profileError(profile string, env envconfig.EnvLookup, err error) error {
	file, _ := env.LookupEnv("TEMPORAL_CONFIG_FILE")
	if file == "" {
		file = envconfig.DefaultConfigFilePath()
	}
	name := profile
	if name == "" {
		name, _ = env.LookupEnv("TEMPORAL_PROFILE")
	}
	if strings.Contains(err.Error(), "unable to find profile") {
		return config.Invalid("the Temporal profile %q is not in %s; use --profile or TEMPORAL_PROFILE with a profile that exists (temporal config list)", name, file)
	}
	return config.Invalid("reading the Temporal client configuration (%s): %v; fix the file or point TEMPORAL_CONFIG_FILE elsewhere", file, err)
}
