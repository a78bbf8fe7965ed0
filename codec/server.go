package codec

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// MaxRequestBytes caps the body of an /encode or /decode request: a
// history's payloads stay far below it (the Temporal server refuses a blob
// over 2 MiB), and the cap keeps one request from taking the server's memory.
const MaxRequestBytes = 8 << 20

// MaxConcurrent bounds the requests that decrypt or encrypt at once: the
// CPU work, and the memory of the payloads it parses and writes. A request
// takes its place only once its body has arrived, so a slow upload holds
// none while its bytes trickle in.
const MaxConcurrent = 4

// MaxBufferedBytes bounds the bytes of request bodies held in memory at
// once, counted as they arrive (in blocks of up to 64 KiB): eight bodies
// at the size cap, or thousands of uploads that have sent little.
const MaxBufferedBytes = 8 * MaxRequestBytes

// BodyTimeout bounds the time a request's body takes to arrive once its
// headers have: a history page's payloads arrive in milliseconds, and an
// upload slower than this is cut (408).
const BodyTimeout = 10 * time.Second

// SlotWait bounds how long a request waits for room — for its body's bytes
// (MaxBufferedBytes) or for a place to decrypt (MaxConcurrent) — before it
// is answered 503 with Retry-After instead of being left to hang.
const SlotWait = 2 * time.Second

// readBlock is how many bytes of a body are taken from the budget, and
// allocated, at a time.
const readBlock = 64 << 10

// MinTokenLength is the shortest bearer token NewHandler accepts.
const MinTokenLength = 16

// Headers the Web UI sends with its requests: Content-Type
// (application/json, which makes the browser ask with a preflight first),
// X-Namespace, and Authorization and Authorization-Extras when the UI is
// told to pass its access token on.
const allowHeaders = "Content-Type, X-Namespace, Authorization, Authorization-Extras"

// HandlerOptions says what NewHandler serves and whom.
type HandlerOptions struct {
	// Codec encrypts and decrypts the payloads served; NewHandler refuses
	// none.
	Codec *AESGCM
	// Hosts are the Host headers served, as "host:port" (exactly that
	// port) or "host" (any port); any other gets 403 before anything
	// else is looked at. A page that rebinds its own domain name to the
	// codec server's address still sends its own name as Host, so this
	// list is what defeats DNS rebinding. LocalHosts gives the defaults.
	// NewHandler refuses an empty list.
	Hosts []string
	// Origins are the Web UI origins (scheme://host:port, as the address
	// bar shows the Web UI) whose pages may call the codec server; a
	// request with any other Origin gets 403.
	Origins []string
	// Token, when set, must come with every /encode and /decode request as
	// "Authorization: Bearer <Token>"; a request without it gets 401.
	Token string
	// Logger logs every refusal with its reason, so that whoever sees
	// "decode failed" in the Web UI can find out why. Nil logs nothing.
	Logger *slog.Logger
	// AllowPlaintext makes /decode return payloads that are neither
	// encrypted nor authenticated under the key (Options.Plaintext)
	// unchanged. By
	// default it refuses them (400): nobody who holds the key
	// wrote them, and shown decoded beside the rest of a history they
	// would look as if someone had.
	AllowPlaintext bool
}

// LocalHosts are the Host headers a codec server listening on addr (as
// net.Listener.Addr().String() gives it) is reached by from this machine:
// localhost, 127.0.0.1 and [::1] on its port, and addr itself unless it is
// the unspecified address.
func LocalHosts(addr string) []string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	hosts := []string{net.JoinHostPort("localhost", port), net.JoinHostPort("127.0.0.1", port), net.JoinHostPort("::1", port)}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		self := net.JoinHostPort(strings.ToLower(host), port)
		if !contains(hosts, self) {
			hosts = append(hosts, self)
		}
	}
	return hosts
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// NewServer is the http.Server for a codec handler (NewHandler): every
// phase of a request is bounded in time, so slow clients cannot hold
// connections (and their buffers) open, and headers are bounded in size
// (an Authorization header with a JWT fits).
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// NewHandler serves the Temporal codec-server protocol for the Web UI and
// the CLI with o.Codec: POST /encode and POST /decode with {"payloads":
// [...]} in protojson, and the CORS preflights (OPTIONS) a browser sends
// before them.
//
// A request is refused, before its body is read, when
//   - its Host is not one of o.Hosts (403: a DNS-rebinding page in a
//     browser; a client outside a browser writes any Host it likes),
//   - it carries an Origin that is not one of o.Origins (403: a page of
//     another site; the Web UI's own page is served),
//   - o.Token is set and the request does not carry it (401; preflights,
//     which browsers send without credentials, need none),
//   - its Content-Type is not application/json (415: a browser can send
//     text/plain cross-origin without asking first, never JSON),
//   - its body is over MaxRequestBytes (413),
//   - it names no namespace in X-Namespace, or not a namespace name (400).
//
// Its body must then arrive within BodyTimeout (else 408); a request that
// finds no room within SlotWait, for its body or to decrypt, gets 503 with
// Retry-After.
//
// The answers never allow credentials (cookies): the UI's codec setting
// includeCredentials would make a browser attach whatever cookies it holds
// for the codec server's address, the ambient authority a hostile page
// rides on. Decoded payloads are marked not to be cached.
//
// /encode always encrypts, for the namespace the request names in
// X-Namespace (as the Web UI and the CLI send it; a codec bound to a
// namespace serves that one only). /decode decrypts payloads written for
// that namespace (or, in the formats before version 3 and by a codec given
// no namespace, for none), returns the plaintext payloads authenticated
// under the key (the Nexus service's answers, see Options.Plaintext) once
// their tag verifies, and refuses a request holding a payload that is neither,
// unless o.AllowPlaintext: such a payload was written by a client without
// the key (a history written before the key was set, a workflow started
// through Temporal's HTTP API), and the Web UI then shows it as it is,
// undecoded, instead of as if the key had vouched for it. What the server
// decrypts is only what it authenticated.
func NewHandler(o HandlerOptions) (http.Handler, error) {
	if o.Codec == nil {
		return nil, errors.New("codec: the server needs a codec (HandlerOptions.Codec, see New)")
	}
	h, err := newHandler(o)
	if err != nil {
		return nil, err
	}
	return h.routes(o.Codec), nil
}

// routes serves c's /encode and /decode with h's checks.
func (h *handler) routes(c *AESGCM) http.Handler {
	requireEncrypted := c.requireEncrypted || !h.allowPlaintext
	mux := http.NewServeMux()
	mux.HandleFunc("POST /encode", h.codecRequest(c, func(ns string, p []*commonpb.Payload) ([]*commonpb.Payload, error) {
		return c.encode(p, ns)
	}))
	mux.HandleFunc("POST /decode", h.codecRequest(c, func(ns string, p []*commonpb.Payload) ([]*commonpb.Payload, error) {
		return c.decode(p, ns, requireEncrypted)
	}))
	mux.HandleFunc("OPTIONS /encode", h.preflight)
	mux.HandleFunc("OPTIONS /decode", h.preflight)
	return h.checkHost(mux)
}

// newHandler makes the checks of o; routes serves a codec with them.
func newHandler(o HandlerOptions) (*handler, error) {
	h := &handler{origins: map[string]bool{}, exact: map[string]bool{}, anyPort: map[string]bool{},
		log: o.Logger, allowPlaintext: o.AllowPlaintext, slots: make(chan struct{}, MaxConcurrent),
		bodies: newBudget(MaxBufferedBytes), slotWait: SlotWait, bodyTimeout: BodyTimeout}
	if len(o.Hosts) == 0 {
		return nil, errors.New("codec: the server needs the Host names it is reached by (HandlerOptions.Hosts, see LocalHosts)")
	}
	for _, host := range o.Hosts {
		host = strings.ToLower(strings.TrimSpace(host))
		if name, port, err := net.SplitHostPort(host); err == nil {
			h.exact[net.JoinHostPort(name, port)] = true
		} else {
			h.anyPort[strings.Trim(host, "[]")] = true
		}
	}
	for _, origin := range o.Origins {
		h.origins[normalizeOrigin(origin)] = true
	}
	if o.Token != "" {
		if len(o.Token) < MinTokenLength {
			return nil, fmt.Errorf("codec: the token is %d characters, want at least %d; make one with `openssl rand -base64 32`", len(o.Token), MinTokenLength)
		}
		sum := sha256.Sum256([]byte(o.Token))
		h.token = sum[:]
	}
	return h, nil
}

type handler struct {
	origins map[string]bool
	exact   map[string]bool // "host:port"
	anyPort map[string]bool // "host"
	token   []byte          // SHA-256 of the token; nil when none is required
	log     *slog.Logger

	allowPlaintext bool
	slots          chan struct{} // places to decrypt or encrypt (MaxConcurrent)
	bodies         *budget       // bytes of bodies in memory (MaxBufferedBytes)
	slotWait       time.Duration // SlotWait; tests shorten it
	bodyTimeout    time.Duration // BodyTimeout; tests shorten it
}

// normalizeOrigin lets "http://LOCALHOST:8233/" name the origin the browser
// sends as "http://localhost:8233".
func normalizeOrigin(o string) string {
	return strings.ToLower(strings.TrimSuffix(strings.TrimSpace(o), "/"))
}

// refuse logs a refusal and answers it.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, status int, msg string, args ...any) {
	if h.log != nil {
		args = append(args, "method", r.Method, "path", truncate(r.URL.Path, 64), "remote", r.RemoteAddr, "status", status)
		h.log.Warn(msg, args...)
	}
	http.Error(w, msg, status)
}

// allowedHost says whether the request's Host is one of the list.
func (h *handler) allowedHost(host string) bool {
	host = strings.ToLower(host)
	if name, port, err := net.SplitHostPort(host); err == nil {
		return h.exact[net.JoinHostPort(name, port)] || h.anyPort[name]
	}
	return h.anyPort[strings.Trim(host, "[]")]
}

// checkHost refuses, before any route, a request whose Host is not in the
// list.
func (h *handler) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if !h.allowedHost(r.Host) {
			h.refuse(w, r, http.StatusForbidden, "codec server refused a request for a Host it does not serve; add the name you reach it by with --allowed-host if it is yours",
				"host", truncate(r.Host, 128))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// cors answers for the request's origin: true when the request may go on
// (no Origin, or an allowed one, whose CORS header it sets), false after
// it has written a 403.
func (h *handler) cors(w http.ResponseWriter, r *http.Request) bool {
	w.Header().Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if !h.origins[normalizeOrigin(origin)] {
		h.refuse(w, r, http.StatusForbidden, "codec server refused a request from an origin it does not allow; add the Web UI's origin with --web-ui-origin if it is yours",
			"origin", truncate(origin, 128))
		return false
	}
	w.Header().Set("Access-Control-Allow-Origin", origin)
	return true
}

// authorized checks the bearer token, when one is required, in constant
// time (over hashes, so the length does not leak either).
func (h *handler) authorized(w http.ResponseWriter, r *http.Request) bool {
	if h.token == nil {
		return true
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], h.token) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="siteops codec server"`)
		h.refuse(w, r, http.StatusUnauthorized, "codec server refused a request without its bearer token (Authorization: Bearer <SITEOPS_CODEC_TOKEN>)")
		return false
	}
	return true
}

func (h *handler) preflight(w http.ResponseWriter, r *http.Request) {
	if !h.cors(w, r) {
		return
	}
	w.Header().Set("Access-Control-Allow-Methods", "POST, OPTIONS")
	w.Header().Set("Access-Control-Allow-Headers", allowHeaders)
	w.Header().Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

// codecRequest serves /encode or /decode with f, for the request's
// namespace. The body is read first, holding only the bytes that have
// arrived; the place to decrypt is taken after it, for the CPU work alone.
func (h *handler) codecRequest(c *AESGCM, f func(ns string, p []*commonpb.Payload) ([]*commonpb.Payload, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.cors(w, r) || !h.authorized(w, r) {
			return
		}
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			h.refuse(w, r, http.StatusUnsupportedMediaType, "codec server accepts only Content-Type: application/json",
				"content_type", truncate(r.Header.Get("Content-Type"), 64))
			return
		}
		if r.ContentLength > MaxRequestBytes {
			h.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request is over %d bytes; send fewer payloads at a time", MaxRequestBytes))
			return
		}
		ns, ok := h.namespace(w, r, c)
		if !ok {
			return
		}
		blocks, release, ok := h.readBody(w, r)
		if !ok {
			return
		}
		defer release()
		timer := time.NewTimer(h.slotWait)
		defer timer.Stop()
		select {
		case h.slots <- struct{}{}:
			defer func() { <-h.slots }()
		case <-timer.C:
			h.busy(w, r, fmt.Sprintf("codec server is busy: %d requests are being decrypted; try again in a second", MaxConcurrent))
			return
		case <-r.Context().Done():
			return
		}
		body := bytes.Join(blocks, nil)
		var in commonpb.Payloads
		if err := protojson.Unmarshal(body, &in); err != nil {
			http.Error(w, `the body is not {"payloads": [...]} in protojson: `+err.Error(), http.StatusBadRequest)
			return
		}
		out, err := f(ns, in.GetPayloads())
		if errors.Is(err, ErrNotEncrypted) {
			h.refuse(w, r, http.StatusBadRequest, err.Error()+"; run the codec server with --allow-plaintext to show such payloads as they are", "namespace", ns)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b, err := protojson.Marshal(&commonpb.Payloads{Payloads: out})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(b)
	}
}

// namespace is the namespace the request names in X-Namespace, which it
// must: without it /decode would open the payloads of every namespace for
// whoever asks, and /encode would write payloads bound to none. It answers
// 400 itself, and says false, for a request without one, with one that is
// not a namespace name, or with another than the one c is bound to.
func (h *handler) namespace(w http.ResponseWriter, r *http.Request, c *AESGCM) (string, bool) {
	ns := r.Header.Get("X-Namespace")
	switch {
	case ns == "":
		h.refuse(w, r, http.StatusBadRequest, "codec server refused a request without X-Namespace: it decrypts only for the namespace a request names; send the header X-Namespace: <namespace> (the Web UI and `temporal --codec-endpoint` send it)")
		return "", false
	case !namespaceName.MatchString(ns):
		h.refuse(w, r, http.StatusBadRequest, "codec server refused an X-Namespace that is not a Temporal namespace name", "namespace", truncate(ns, 64))
		return "", false
	case c.namespace != "" && ns != c.namespace:
		h.refuse(w, r, http.StatusBadRequest, fmt.Sprintf("codec server serves namespace %s only; send X-Namespace: %s, or run a codec server for the other namespace", c.namespace, c.namespace),
			"namespace", ns)
		return "", false
	}
	return ns, true
}

// readBody reads the request's body under its own deadline (h.bodyTimeout
// from now), taking bytes from h.bodies a block at a time as they arrive,
// so that an upload whose bytes trickle in holds little. It returns the
// body's blocks and the func that gives their bytes back; or it answers
// the request itself (413, 408, 503, 400) and says false.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request) ([][]byte, func(), bool) {
	// An error here means the connection cannot take a deadline (HTTP/2
	// over a hijacked stream, say); the server's ReadTimeout still bounds
	// the request then.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(h.bodyTimeout))
	body := http.MaxBytesReader(w, r.Body, MaxRequestBytes)
	var blocks [][]byte
	var held, read int64
	release := func() { h.bodies.give(held) }
	for {
		size := int64(readBlock)
		if r.ContentLength >= 0 {
			if read == r.ContentLength {
				return blocks, release, true
			}
			size = min(size, r.ContentLength-read)
		}
		if !h.bodies.take(r.Context(), size, h.slotWait) {
			release()
			if r.Context().Err() == nil {
				h.busy(w, r, "codec server is busy: request bodies fill the memory it sets aside for them; try again in a second")
			}
			return nil, nil, false
		}
		held += size
		block := make([]byte, size)
		n, err := io.ReadFull(body, block)
		read += int64(n)
		if n > 0 {
			blocks = append(blocks, block[:n])
		}
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return blocks, release, true
		}
		release()
		var tooLarge *http.MaxBytesError
		var netErr net.Error
		switch {
		case errors.As(err, &tooLarge):
			h.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request is over %d bytes; send fewer payloads at a time", tooLarge.Limit))
		case errors.As(err, &netErr) && netErr.Timeout():
			h.refuse(w, r, http.StatusRequestTimeout, fmt.Sprintf("the request's body did not arrive within %s; send it faster, or fewer payloads at a time", h.bodyTimeout),
				"received_bytes", read)
		case r.Context().Err() != nil:
			// The client went away: nobody reads an answer.
		default:
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		}
		return nil, nil, false
	}
}

// busy answers 503 with Retry-After, for a request that found no room
// within h.slotWait.
func (h *handler) busy(w http.ResponseWriter, r *http.Request, msg string) {
	w.Header().Set("Retry-After", "1")
	h.refuse(w, r, http.StatusServiceUnavailable, msg)
}
