package agentsite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

const (
	// DefaultTimeout bounds one request, connection to last body byte.
	DefaultTimeout = 30 * time.Second
	// DefaultUserAgent is sent unless WithUserAgent says otherwise.
	DefaultUserAgent = "siteops-agentsite/1"
	// RequestIDHeader carries the server's id for a request.
	RequestIDHeader = "X-Request-Id"
	// MaxIdleConns is how many connections to the API a client keeps open
	// between calls. Go's default keeps two per host, so of a burst of
	// concurrent calls (an onboarding's parallel uploads, several
	// onboardings', lead syncs') all but two connections were closed as
	// the calls ended and opened again, with a TLS handshake each, for the
	// next burst. Idle connections are still closed after the transport's
	// IdleConnTimeout (90 s).
	MaxIdleConns = 100

	apiPrefix       = "/api/v1"
	maxErrorBody    = 64 << 10
	maxResponseBody = 32 << 20
)

// Client calls the Agent-Site API. It is safe for concurrent use.
type Client struct {
	base      *url.URL // scheme://host[/prefix] without a trailing slash, /api/v1 not included
	apiKey    string
	http      *http.Client
	userAgent string
	resolver  Resolver
	breaker   *breaker
	limiter   *Limiter // nil: no client-side limit
	now       func() time.Time
	loopback  bool
	metrics   instruments
}

type config struct {
	httpClient *http.Client
	timeout    time.Duration
	userAgent  string
	resolver   Resolver
	breaker    BreakerSettings
	limiter    *Limiter
	tracer     trace.TracerProvider
	now        func() time.Time
	loopback   bool
}

// Option configures a Client. Options validate their argument: NewClient
// fails with the option's error rather than running with a bad setting.
type Option func(*config) error

// WithHTTPClient sets the HTTP client whose transport carries the requests.
// The client is copied; its Timeout is overridden by WithTimeout and
// redirects are never followed.
func WithHTTPClient(c *http.Client) Option {
	return func(cfg *config) error {
		if c == nil {
			return errors.New("agentsite: WithHTTPClient: nil *http.Client")
		}
		cfg.httpClient = c
		return nil
	}
}

// WithTimeout bounds each request (DefaultTimeout otherwise).
func WithTimeout(d time.Duration) Option {
	return func(cfg *config) error {
		if d <= 0 {
			return fmt.Errorf("agentsite: WithTimeout: %s is not a positive duration", d)
		}
		cfg.timeout = d
		return nil
	}
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option {
	return func(cfg *config) error {
		if strings.TrimSpace(ua) == "" || strings.ContainsAny(ua, "\r\n") {
			return fmt.Errorf("agentsite: WithUserAgent: %q is not a usable User-Agent", ua)
		}
		cfg.userAgent = ua
		return nil
	}
}

// WithResolver sets the resolver used to check that a webhook URL's host
// resolves only to public addresses (net.DefaultResolver otherwise).
func WithResolver(r Resolver) Option {
	return func(cfg *config) error {
		if r == nil {
			return errors.New("agentsite: WithResolver: nil Resolver")
		}
		cfg.resolver = r
		return nil
	}
}

// WithLoopbackReceivers lets webhook endpoints point at loopback receivers
// over http on any port, for tests and demos against the simulator started
// with --allow-loopback-receivers. Never use it against the real service.
func WithLoopbackReceivers() Option {
	return func(cfg *config) error {
		cfg.loopback = true
		return nil
	}
}

// WithBreaker sets the circuit breaker's thresholds.
func WithBreaker(s BreakerSettings) Option {
	return func(cfg *config) error {
		if err := s.validate(); err != nil {
			return err
		}
		cfg.breaker = s
		return nil
	}
}

// WithLimiter makes every request wait for l first and report its answer
// to l (see Limiter). Share one Limiter among all the clients of a process
// that use the same API key. Without it the client sends at once.
func WithLimiter(l *Limiter) Option {
	return func(cfg *config) error {
		if l == nil {
			return errors.New("agentsite: WithLimiter: nil *Limiter; create one per API key with NewLimiter")
		}
		cfg.limiter = l
		return nil
	}
}

// WithTracerProvider sets where the client's HTTP spans go (the global
// provider otherwise).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(cfg *config) error {
		if tp == nil {
			return errors.New("agentsite: WithTracerProvider: nil TracerProvider")
		}
		cfg.tracer = tp
		return nil
	}
}

// WithClock sets the clock used to turn an HTTP-date Retry-After into a
// duration and to report when an open breaker may be retried.
func WithClock(now func() time.Time) Option {
	return func(cfg *config) error {
		if now == nil {
			return errors.New("agentsite: WithClock: nil clock")
		}
		cfg.now = now
		return nil
	}
}

// NewClient returns a client for the API at baseURL (e.g.
// https://api.example.com; the client adds /api/v1) authenticated with
// apiKey.
func NewClient(baseURL, apiKey string, opts ...Option) (*Client, error) {
	base, err := parseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(apiKey) == "" {
		return nil, errors.New("agentsite: the API key is empty; set AGENTSITE_API_KEY to a key with the scopes siteops needs")
	}
	if strings.ContainsAny(apiKey, "\r\n ") {
		return nil, errors.New("agentsite: the API key contains whitespace; check how AGENTSITE_API_KEY was set")
	}
	cfg := config{
		timeout:   DefaultTimeout,
		userAgent: DefaultUserAgent,
		resolver:  defaultResolver{},
		breaker:   DefaultBreakerSettings(),
		tracer:    otel.GetTracerProvider(),
		now:       time.Now,
	}
	for _, opt := range opts {
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	var hc http.Client
	if cfg.httpClient != nil {
		hc = *cfg.httpClient
	}
	transport := hc.Transport
	if transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns, t.MaxIdleConnsPerHost = MaxIdleConns, MaxIdleConns
		transport = t
	}
	hc.Transport = otelhttp.NewTransport(routeTagger{transport},
		otelhttp.WithTracerProvider(cfg.tracer),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			return r.Method + " " + routeFrom(r.Context())
		}),
	)
	hc.Timeout = cfg.timeout
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	b := newBreaker(cfg.breaker, time.Now) // gobreaker keeps its own wall clock
	return &Client{
		metrics:   newInstruments(b),
		base:      base,
		apiKey:    apiKey,
		http:      &hc,
		userAgent: cfg.userAgent,
		resolver:  cfg.resolver,
		breaker:   b,
		limiter:   cfg.limiter,
		now:       cfg.now,
		loopback:  cfg.loopback,
	}, nil
}

func parseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("agentsite: base URL %q is not an absolute http(s) URL; set AGENTSITE_BASE_URL to e.g. https://api.example.com", raw)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("agentsite: base URL %q must not carry credentials, a query or a fragment", u.Redacted())
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), apiPrefix)
	u.RawPath = ""
	return u, nil
}

// BaseURL returns the base URL the client was made with, without /api/v1.
func (c *Client) BaseURL() string { return c.base.String() }

// Response is what a successful call keeps of the HTTP answer.
type Response struct {
	Status    int
	RequestID string
	Header    http.Header
}

// request is one API call before it is sent.
type request struct {
	method string
	route  string // template, e.g. /sites/{site_id}/agent
	path   string // route with escaped values
	query  url.Values
	body   any
	key    string // idempotency key; mutating requests only
	// answer is the 2xx body the contract promises, e.g. { data: <site> },
	// named in the ContractError when the body does not decode into it.
	answer string
}

// newRequest fills route with args in order, each escaped as one path segment.
func newRequest(method, route string, args ...string) *request {
	path := route
	for _, a := range args {
		i := strings.IndexByte(path, '{')
		j := strings.IndexByte(path, '}')
		if i < 0 || j < i {
			panic("agentsite: more arguments than placeholders in " + route)
		}
		path = path[:i] + url.PathEscape(a) + path[j+1:]
	}
	return &request{method: method, route: route, path: path}
}

func (r *request) mutating() bool { return r.method != http.MethodGet && r.method != http.MethodHead }

// errNotSent marks a request given up, unsent, while it waited for the
// limiter because its context ended.
var errNotSent = errors.New("nothing was sent")

// do sends r and decodes a 2xx body into out (when out is non-nil and the
// body is not empty); a body that does not decode is a *ContractError. It
// is the one place that builds headers, waits for the
// limiter, goes through the breaker, reads bodies and makes errors.
func (c *Client) do(ctx context.Context, r *request, out any) (*Response, error) {
	if r.mutating() {
		if r.key == "" {
			return nil, ErrMissingIdempotencyKey
		}
		if strings.ContainsAny(r.key, "\r\n") || len(r.key) > 255 {
			return nil, &ValidationError{Field: "Idempotency-Key", Reason: "must be at most 255 characters on one line"}
		}
	}
	var payload []byte
	if r.body != nil {
		var err error
		if payload, err = json.Marshal(r.body); err != nil {
			return nil, fmt.Errorf("agentsite: encoding %s %s body: %w", r.method, r.route, err)
		}
	}
	fullPath := c.base.EscapedPath() + apiPrefix + r.path
	target := c.base.Scheme + "://" + c.base.Host + fullPath
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}

	// The limiter comes before the breaker: a request it holds back or
	// refuses was never sent and says nothing about the server's health.
	if c.limiter != nil {
		if err := c.limiter.Wait(ctx); err != nil {
			if !errors.Is(err, ErrThrottled) {
				err = fmt.Errorf("agentsite: %s %s: %w while waiting for the rate limiter: %w", r.method, fullPath, errNotSent, err)
			}
			c.metrics.record(ctx, r.method, r.route, 0, err)
			return nil, err
		}
	}

	res, err := c.breaker.execute(func() (result, error) {
		var body io.Reader
		if payload != nil {
			body = bytes.NewReader(payload)
		}
		req, err := http.NewRequestWithContext(withRoute(ctx, apiPrefix+r.route), r.method, target, body)
		if err != nil {
			return result{}, fmt.Errorf("agentsite: building %s %s: %w", r.method, r.route, err)
		}
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
		req.Header.Set("Accept", "application/json")
		req.Header.Set("User-Agent", c.userAgent)
		if payload != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if r.mutating() {
			req.Header.Set("Idempotency-Key", r.key)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return result{}, &TransportError{Method: r.method, Path: fullPath, Err: stripURL(err)}
		}
		defer func() { _ = resp.Body.Close() }()
		meta := &Response{Status: resp.StatusCode, RequestID: requestID(resp.Header), Header: resp.Header}
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
			apiErr := &APIError{Method: r.method, Path: fullPath, Status: resp.StatusCode, RequestID: meta.RequestID, Body: raw}
			apiErr.parseBody()
			if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
				apiErr.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), c.now())
			}
			return result{meta: meta}, apiErr
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody+1))
		if err != nil {
			return result{}, &TransportError{Method: r.method, Path: fullPath, Err: stripURL(err)}
		}
		if len(raw) > maxResponseBody {
			return result{meta: meta}, fmt.Errorf("agentsite: %s %s: response body over %d bytes", r.method, fullPath, maxResponseBody)
		}
		return result{meta: meta, body: raw}, nil
	})
	status := 0
	if res.meta != nil {
		status = res.meta.Status
		if c.limiter != nil {
			var apiErr *APIError
			var retryAfter time.Duration
			if errors.As(err, &apiErr) {
				retryAfter = apiErr.RetryAfter
			}
			c.limiter.Observe(status, retryAfter)
		}
	}
	c.metrics.record(ctx, r.method, r.route, status, err)
	if err != nil {
		return res.meta, err
	}
	if out != nil && len(bytes.TrimSpace(res.body)) > 0 {
		if err := json.Unmarshal(res.body, out); err != nil {
			// Every decoding failure of a 2xx body is the answer's fault
			// (the out values only decode), and asking again gets it again.
			answer := r.answer
			if answer == "" {
				answer = "what the contract says"
			}
			return res.meta, c.contractError(r, res.meta, fmt.Sprintf("the %d answer is not %s: %s", res.meta.Status, answer, decodeProblem(err)), err)
		}
	}
	return res.meta, nil
}

type result struct {
	meta *Response
	body []byte
}

// TransportError is a request that got no HTTP answer: a refused or dropped
// connection, a timeout, a cancelled context. For a mutating request the
// server may or may not have applied it; retry with the same idempotency key.
type TransportError struct {
	Method string
	Path   string
	Err    error
}

func (e *TransportError) Error() string {
	return fmt.Sprintf("agentsite: %s %s: no answer: %v", e.Method, e.Path, e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// stripURL removes the *url.Error wrapper, whose text repeats the URL with
// its query; the TransportError names the path instead.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func requestID(h http.Header) string {
	if id := h.Get(RequestIDHeader); id != "" {
		return id
	}
	return h.Get("Request-Id")
}

// parseRetryAfter reads both forms of Retry-After: delay seconds and an
// HTTP date. A missing, malformed or past value gives zero.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var secs int64
	isNum := true
	for _, c := range v {
		if c < '0' || c > '9' {
			isNum = false
			break
		}
		secs = secs*10 + int64(c-'0')
		if secs > 1<<31 {
			secs = 1 << 31
		}
	}
	if isNum {
		return time.Duration(secs) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	if d := t.Sub(now); d > 0 {
		return d
	}
	return 0
}

// data is the {"data": ...} wrapper of single-resource answers.
type data[T any] struct {
	Data T `json:"data"`
}
