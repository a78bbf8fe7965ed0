// Package doctor checks what a siteops process needs before it runs: that
// Temporal answers and has the namespace and the search attributes, that
// the Agent-Site API accepts the key with the scopes siteops reads with,
// that the database answers and is migrated, that SITEOPS_SECRET_KEY
// decrypts the stored secrets, and that the addresses to listen on are
// free. `siteops doctor` runs them all; the worker and the ingress run the
// ones that concern them at start.
//
// Each check is a function that returns a Result; it never prints and
// never changes anything it checks. Write scopes (sites:write,
// agents:write, knowledge:write, webhooks:write) cannot be checked without
// writing; the first activity that lacks one fails with the scope's name.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/release"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
)

// Status is how a check came out.
type Status string

// The outcomes of a check.
const (
	OK   Status = "ok"
	Warn Status = "warn" // a problem that does not stop this process
	Fail Status = "fail"
	Skip Status = "skip" // not configured here
)

// Result is one check's outcome: one line for people, one object for
// scripts.
type Result struct {
	Check  string `json:"check"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	// Transient marks a failure that a retry may fix: the dependency is
	// down, slow or throttling (5xx, 429, a timeout, a refused
	// connection), not misconfigured. A process retries such a check for
	// a while, then starts degraded and keeps checking.
	Transient bool `json:"transient,omitempty"`
	// Partial marks a failure that leaves the process useful: part of
	// what the check covers works (one stored secret of two decrypts). A
	// process starts degraded; doctor still fails until it is fixed.
	Partial bool `json:"partial,omitempty"`
	// Watch marks a check of what changes while a process runs (the
	// stored secrets): a process runs it again every period for as long
	// as it runs, passing or not, so that /readyz and siteops_check_ok
	// say what holds now, not what held at start.
	Watch bool `json:"-"`
	// Err is why a check failed, for exit codes; never printed as is.
	Err error `json:"-"`
}

// Refuses reports whether a process must not start on r: a failure no
// retry fixes (a wrong key, a missing namespace, a key that reads none of
// the stored secrets).
func (r Result) Refuses() bool { return r.Status == Fail && !r.Transient && !r.Partial }

func (r Result) String() string { return fmt.Sprintf("%-5s %-28s %s", r.Status, r.Check, r.Detail) }

func ok(check, format string, args ...any) Result {
	return Result{Check: check, Status: OK, Detail: fmt.Sprintf(format, args...)}
}

// FailedWith is check failed because of err: its detail err's message on
// one line, transient when a retry may fix it (IsTransient).
func FailedWith(check string, err error) Result {
	return Result{Check: check, Status: Fail, Detail: oneLine(err.Error()), Err: err, Transient: IsTransient(err)}
}

// Invalid is check failed on a setting that cannot be used: err, which
// ends the command as a setting to fix does (config.ErrInvalid).
func Invalid(check string, err error) Result {
	return Result{Check: check, Status: Fail, Detail: err.Error(), Err: invalidSetting{err}}
}

// invalidSetting is an error about a setting that matches
// config.ErrInvalid.
type invalidSetting struct{ err error }

func (e invalidSetting) Error() string        { return e.err.Error() }
func (e invalidSetting) Unwrap() error        { return e.err }
func (e invalidSetting) Is(target error) bool { return target == config.ErrInvalid }

// BuildID checks the build id a versioned worker with these settings
// would poll as, or says why it would refuse to start.
func BuildID(w config.Worker) Result {
	const check = "build id"
	if !w.Versioning {
		return Skipped(check, "SITEOPS_WORKER_VERSIONING=false: workers are not versioned")
	}
	id, source, err := release.BuildID(w.BuildID)
	if err != nil {
		return Invalid(check, err)
	}
	return ok(check, "release %d, build id %s (from %s)", release.Number, id, source)
}

// IsTransient reports whether err is the kind of failure a retry may fix:
// the Agent-Site API answering 5xx, 429 or 408, or not answering; Temporal
// or the database unavailable, overloaded or too slow; a refused or reset
// connection; a deadline. Everything else (401, 403, a missing namespace,
// a bad setting) is configuration.
func IsTransient(err error) bool {
	var (
		apiErr    *agentsite.APIError
		transport *agentsite.TransportError
		open      *agentsite.BreakerOpenError
		throttled *agentsite.ThrottledError
		netErr    net.Error
		opErr     *net.OpError
		unavail   *serviceerror.Unavailable
		deadline  *serviceerror.DeadlineExceeded
		exhausted *serviceerror.ResourceExhausted
	)
	switch {
	case err == nil:
		return false
	case errors.As(err, &apiErr):
		return apiErr.Status >= 500 || apiErr.Status == http.StatusTooManyRequests || apiErr.Status == http.StatusRequestTimeout
	case errors.As(err, &transport), errors.As(err, &open), errors.As(err, &throttled),
		errors.As(err, &unavail), errors.As(err, &deadline), errors.As(err, &exhausted),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, store.ErrUnreachable),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.As(err, &netErr), errors.As(err, &opErr):
		return true
	}
	switch grpcstatus.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}

// Skipped is a check that does not apply here.
func Skipped(check, why string) Result { return Result{Check: check, Status: Skip, Detail: why} }

// AsWarning turns a failure into a warning: for a process that runs
// without what the check wants (the ingress while Temporal is down).
func (r Result) AsWarning(why string) Result {
	if r.Status == Fail {
		r.Status, r.Detail = Warn, r.Detail+"; "+why
	}
	return r
}

// Failed returns the first failed result, if any.
func Failed(results []Result) (Result, bool) {
	for _, r := range results {
		if r.Status == Fail {
			return r, true
		}
	}
	return Result{}, false
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ") }

// timeout bounds each check.
const timeout = 10 * time.Second

// Temporal checks that the server answers and has the namespace.
func Temporal(ctx context.Context, c client.Client, conn, namespace string) Result {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return FailedWith("temporal", fmt.Errorf("%s does not answer: %w", conn, err))
	}
	_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	var nf *serviceerror.NamespaceNotFound
	if errors.As(err, &nf) {
		return FailedWith("temporal", fmt.Errorf("%s has no namespace %s; create it with deploy/temporal-setup.sh or set TEMPORAL_NAMESPACE / --namespace: %w", conn, namespace, starter.ErrNotFound))
	}
	if err != nil {
		return FailedWith("temporal", fmt.Errorf("%s: describing namespace %s: %w", conn, namespace, err))
	}
	return ok("temporal", "%s answers; namespace %s exists", conn, namespace)
}

// SearchAttributes checks that the namespace has the search attributes
// siteops uses.
func SearchAttributes(ctx context.Context, s *starter.Starter) Result {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	missing, err := s.MissingSearchAttributes(ctx)
	if err != nil {
		return FailedWith("search attributes", fmt.Errorf("listing them: %w", err))
	}
	switch {
	case slices.ContainsFunc(missing, func(n string) bool { return n != starter.SearchAttrCaller }):
		return FailedWith("search attributes", fmt.Errorf("namespace %s lacks %s (Keyword); register them with deploy/temporal-setup.sh", s.Namespace(), strings.Join(missing, ", ")))
	case len(missing) > 0:
		// Only the caller of Nexus onboardings: everything else works, and
		// the Nexus service answers onboard UNAVAILABLE until it is there.
		return Result{Check: "search attributes", Status: Warn, Detail: fmt.Sprintf(
			"namespace %s lacks %s (Keyword): the Nexus service cannot count a partner's running onboardings and refuses onboard (UNAVAILABLE, retryable) until it is registered; run deploy/temporal-setup.sh, or `temporal operator search-attribute create --namespace %s --name %s --type Keyword`",
			s.Namespace(), starter.SearchAttrCaller, s.Namespace(), starter.SearchAttrCaller)}
	}
	return ok("search attributes", "%s registered", strings.Join(slices.Sorted(maps.Keys(starter.SearchAttributes)), ", "))
}

// APIKey checks that the Agent-Site API accepts the key, and has the
// scopes siteops reads with (leads:read; listing endpoints). It reads a
// site that does not exist: a 404 means the key and the scope are good.
func APIKey(ctx context.Context, api *agentsite.Client) Result {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, err := range api.LeadPages(ctx, "site_siteops_doctor_probe", agentsite.ListLeadsOptions{Limit: 1}) {
		if r, done := apiResult(err, "leads:read"); done {
			return r
		}
		break
	}
	_, err := api.ListWebhookEndpoints(ctx)
	if r, done := apiResult(err, "the scope to list webhook endpoints"); done {
		return r
	}
	return ok("agent-site api", "%s accepts the key (leads:read, listing endpoints; write scopes are checked when first used)", api.BaseURL())
}

// apiResult judges one probe: done is true when the check is decided.
func apiResult(err error, scope string) (Result, bool) {
	var apiErr *agentsite.APIError
	switch {
	case err == nil:
		return Result{}, false
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound:
		return Result{}, false
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized:
		return FailedWith("agent-site api", fmt.Errorf("the API refused AGENTSITE_API_KEY (401); check the key: %w", err)), true
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusForbidden:
		return FailedWith("agent-site api", fmt.Errorf("AGENTSITE_API_KEY lacks %s (403): %w", scope, err)), true
	}
	return FailedWith("agent-site api", fmt.Errorf("cannot use the API: %w; check AGENTSITE_BASE_URL", err)), true
}

// PublicURL checks SITEOPS_PUBLIC_URL, under which alone webhook
// endpoints are registered and rotated: a malformed value fails (the
// worker refuses it), none warns (no endpoint can be registered or
// rotated, except on loopback in test mode).
func PublicURL(publicURLs string, allowLoopback bool) Result {
	const check = "public url"
	p, err := activities.ParseReceiverPolicy(publicURLs, allowLoopback)
	switch {
	case err != nil:
		return FailedWith(check, err)
	case len(p.Public) == 0 && allowLoopback:
		return Result{Check: check, Status: Warn, Detail: "SITEOPS_PUBLIC_URL is not set: endpoints may be registered and rotated on loopback only (SITEOPS_ALLOW_LOOPBACK_RECEIVERS, test mode)"}
	case len(p.Public) == 0:
		return Result{Check: check, Status: Warn, Detail: "SITEOPS_PUBLIC_URL is not set: no webhook endpoint can be registered or rotated; set it to the public URL the Agent-Site service reaches the ingress under, e.g. https://hooks.example.com/webhooks"}
	}
	return ok(check, "webhook endpoints may be registered and rotated under %s only", p)
}

// ErrNotMigrated marks a database whose schema is behind this build's.
var ErrNotMigrated = errors.New("database not migrated")

// Database checks that the store answers and is migrated to this build's
// schema, without migrating it: a database that is behind fails, since
// every command but the worker and the ingress would fail on it.
func Database(ctx context.Context, st *store.Store, where string) Result {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := st.Ping(ctx); err != nil {
		return FailedWith("database", fmt.Errorf("%s does not answer: %w", where, err))
	}
	version, pending, err := st.PendingMigrations(ctx)
	if err != nil {
		return FailedWith("database", fmt.Errorf("%s: %w", where, err))
	}
	if pending > 0 {
		return FailedWith("database", fmt.Errorf("%s is at schema version %d with %d migration(s) not applied; start the worker (`siteops worker`) or the ingress of this build, which migrate it at start: %w",
			where, version, pending, ErrNotMigrated))
	}
	var warnings []string
	// A later release migrated the store (its migrations only expand):
	// this binary still works on it, and says so.
	if ahead, err := st.AheadMigrations(ctx); err == nil && len(ahead) > 0 {
		warnings = append(warnings, fmt.Sprintf("migration(s) %v of a later release are applied: this binary is older than the store, which works until that release is finalized; deploy it (siteops release status)", ahead))
	}
	// An index build that was interrupted works on, slowly: said, not
	// refused.
	if bad, err := st.InvalidIndexes(ctx); err == nil && len(bad) > 0 {
		warnings = append(warnings, fmt.Sprintf("index(es) %s are invalid (a concurrent build was interrupted): PostgreSQL maintains them but reads scan instead; rebuild each with REINDEX INDEX CONCURRENTLY <name>", strings.Join(bad, ", ")))
	}
	if len(warnings) > 0 {
		return Result{Check: "database", Status: Warn, Detail: fmt.Sprintf("%s answers; schema version %d, and %s", where, version, strings.Join(warnings, "; and "))}
	}
	return ok("database", "%s answers; schema version %d, migrated", where, version)
}

// SecretKey checks that SITEOPS_SECRET_KEY decrypts every active stored
// secret. Without the key it is skipped while nothing is stored, and fails
// once secrets are: the ingress would answer 503 to every delivery for
// their receivers while it looked ready. Secrets that do not decrypt are
// counted and named as such, never as decrypting; when there are some and
// none decrypts, it says so. What it checks changes while a process runs
// (secrets are stored, retired, re-keyed), so its result is marked Watch.
func SecretKey(ctx context.Context, st *store.Store) Result {
	r := secretKey(ctx, st)
	r.Watch = true
	return r
}

func secretKey(ctx context.Context, st *store.Store) Result {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	all, err := st.Secrets(ctx)
	if err != nil {
		return FailedWith("secret key", err)
	}
	if !st.HasSecretKey() {
		if len(all) == 0 {
			return Skipped("secret key", "SITEOPS_SECRET_KEY is not set and no webhook secret is stored (the key is needed to create endpoints, and by the ingress for named receivers)")
		}
		return FailedWith("secret key", noSecretKeyError(fmt.Sprintf("SITEOPS_SECRET_KEY is not set, and the store holds %d active webhook secret(s) sealed by %s: %s; without it the ingress refuses every delivery to their receivers; set SITEOPS_SECRET_KEY to the key they were stored under (or SITEOPS_SECRET_KEY_FILE to a file holding it), the one the worker and the ingress run with: a new key would open none of them",
			len(all), sealers(all), describeSecrets(all))))
	}
	bad, err := st.UnreadableSecrets(ctx)
	if err != nil {
		return FailedWith("secret key", err)
	}
	key := st.SecretKeyID()
	if len(all) == 0 {
		return ok("secret key", "no active webhook secret is stored; SITEOPS_SECRET_KEY (key %s) seals the ones new endpoints get", key)
	}
	if len(bad) == 0 {
		return ok("secret key", "decrypts all %d active stored secrets (SITEOPS_SECRET_KEY is key %s)", len(all), key)
	}
	var otherKey, damaged []store.SecretInfo
	for _, s := range bad {
		if s.Damaged {
			damaged = append(damaged, s)
		} else {
			otherKey = append(otherKey, s)
		}
	}
	var problems []string
	if len(otherKey) > 0 {
		problems = append(problems, fmt.Sprintf("%d were sealed under another key (%s), or damaged: %s; set SITEOPS_SECRET_KEY to the key that sealed them, or run `siteops secret rekey` with it as SITEOPS_OLD_SECRET_KEY",
			len(otherKey), sealers(otherKey), describeSecrets(otherKey)))
	}
	if len(damaged) > 0 {
		problems = append(problems, fmt.Sprintf("%d are sealed under this very key yet do not open, so their rows were changed outside siteops (endpoint, receiver or retirement edited, or the ciphertext damaged, while the key is right): %s; restore the rows from a backup, or give them up (`siteops secret retire --endpoint ID --unreadable`) and register the endpoints again",
			len(damaged), describeSecrets(damaged)))
	}
	head := fmt.Sprintf("%d of %d active stored secrets do not decrypt with SITEOPS_SECRET_KEY (key %s)", len(bad), len(all), key)
	if len(bad) == len(all) {
		head = fmt.Sprintf("none of the %d active stored secrets decrypts with SITEOPS_SECRET_KEY (key %s)", len(all), key)
	}
	msg := head + ": " + strings.Join(problems, "; ")
	var r Result
	if len(damaged) == len(bad) {
		r = FailedWith("secret key", errors.New(msg))
	} else {
		r = FailedWith("secret key", fmt.Errorf("%s: %w", msg, store.ErrKeyMismatch))
	}
	// The other receivers' deliveries still verify: a process starts, and
	// answers the unreadable secrets' deliveries with a status the sender
	// retries. Only a key that reads none of them is refused.
	r.Partial = len(bad) < len(all)
	return r
}

// sealers names the keys that sealed secrets, by their ids.
func sealers(secrets []store.SecretInfo) string {
	var ids []string
	for _, s := range secrets {
		id := s.SealedBy
		if id == "" {
			id = "the first format, no key id"
		} else {
			id = "key " + id
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return strings.Join(ids, ", ")
}

// noSecretKeyError is a missing SITEOPS_SECRET_KEY beside stored secrets.
// It matches store.ErrNoSecretKey, and never advises a new key, which
// would not decrypt what is stored.
type noSecretKeyError string

func (e noSecretKeyError) Error() string        { return string(e) }
func (e noSecretKeyError) Is(target error) bool { return target == store.ErrNoSecretKey }

// describeSecrets names the endpoints of secrets and their receivers, the
// first few of them, so that a line stays a line.
func describeSecrets(secrets []store.SecretInfo) string {
	const named = 5
	ids := make([]string, 0, named+1)
	for i, s := range secrets {
		if i == named {
			ids = append(ids, fmt.Sprintf("and %d more", len(secrets)-named))
			break
		}
		ids = append(ids, fmt.Sprintf("%s (receiver %s)", s.EndpointID, store.ReceiverName(s.Receiver)))
	}
	return strings.Join(ids, ", ")
}

// Address checks that addr can be listened on; setting names the variable
// that chose it. An address in use passes when a siteops process answers
// GET /healthz on it, as the worker's metrics address and the ingress's
// address do: doctor run beside the running worker and ingress (the
// README's "run it by hand") finds their addresses taken by them.
func Address(ctx context.Context, setting, addr string) Result {
	check := "address " + setting
	if addr == "" {
		return Skipped(check, "not set")
	}
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		_ = ln.Close()
		return ok(check, "%s is free", addr)
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		if url, answers := siteopsAnswers(ctx, addr); answers {
			return ok(check, "%s is in use by a running siteops process (it answers GET %s)", addr, url)
		}
	}
	return FailedWith(check, fmt.Errorf("%s=%s cannot be listened on (%w), and no siteops process answers GET /healthz there; free the port or choose another address", setting, addr, err))
}

// siteopsAnswers reports whether a siteops process answers GET /healthz on
// addr as the worker ("ok") and the ingress ({"status":"ok"}) do, and the
// URL it asked.
func siteopsAnswers(ctx context.Context, addr string) (string, bool) {
	url, err := LocalURL(addr, "/healthz")
	if err != nil {
		return "", false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return url, false
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return url, false
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256))
	if err != nil || resp.StatusCode != http.StatusOK {
		return url, false
	}
	switch strings.TrimSpace(string(body)) {
	case "ok", `{"status":"ok"}`:
		return url, true
	}
	return url, false
}

// LocalURL is the URL of path on the process listening on addr, asked from
// this machine: an address without a host, or on every interface
// (":9090", "0.0.0.0:9090", "[::]:9090"), is asked on 127.0.0.1.
func LocalURL(addr, path string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}
