package ingress

import (
	"bytes"
	"container/list"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxConns is how many connections the webhook port keeps open at
// once, by default. Each costs the ingress about 20 to 40 KiB (a goroutine,
// net/http's buffers, a request's header of at most MaxHeaderBytes, a small
// body), so 2,048 of them stay near 80 MiB, well inside the 256 MiB a pod
// of deploy/ gets, beside DefaultBodyBudget and the process's own.
const DefaultMaxConns = 2048

// DefaultShedBusyAfter is how long a connection must have been in its
// current request before the connection cap may close it to admit another,
// by default. A real delivery's header and body arrive in milliseconds,
// and it is verified, recorded and answered in milliseconds more, so a
// second leaves it a wide margin, while a connection busy that long is
// waiting on a slow store, held for a new secret, or an attacker's.
const DefaultShedBusyAfter = time.Second

// connLimits are the connection cap's settings (ServerOptions.MaxConns and
// ShedBusyAfter).
type connLimits struct {
	// max is how many connections may be open (DefaultMaxConns).
	max int
	// shedBusyAfter is the least time a connection must have been in its
	// request to be closed for another (DefaultShedBusyAfter).
	shedBusyAfter time.Duration
	// now is the cap's clock (time.Now); tests set their own.
	now func() time.Time
}

func (o connLimits) withDefaults() connLimits {
	if o.max <= 0 {
		o.max = DefaultMaxConns
	}
	if o.shedBusyAfter <= 0 {
		o.shedBusyAfter = DefaultShedBusyAfter
	}
	if o.now == nil {
		o.now = time.Now
	}
	return o
}

// connPhase is what a connection of the webhook port is doing, which
// decides whether it may be closed to admit another.
type connPhase int

const (
	// phaseIdle: a keep-alive connection between two requests (the next
	// one's header may be arriving).
	phaseIdle connPhase = iota
	// phaseNew: a new connection whose first request's header has not
	// been read yet.
	phaseNew
	// phaseReading: a delivery's body is being read.
	phaseReading
	// phaseBusy: a request is being verified, recorded or answered.
	phaseBusy
	// phaseAnswered: a request was refused and its answer sent; the
	// connection is to be closed (net/http may wait up to half a second
	// first, for the client to read the answer).
	phaseAnswered
	phaseClosed
)

// Shed actions, the values of siteops_webhook_connections_shed_total's
// action label, in the order the cap takes its victims.
const (
	shedAnswered = "closed_answered"
	shedIdle     = "closed_idle"
	shedSlow     = "closed_slow"
	shedBusy     = "closed_busy"
	shedRefused  = "refused"
)

// connLimiter admits at most max connections on the webhook port. At the
// cap, a new connection is admitted in place of an open one, in this
// order: a connection whose request was refused and answered (it is being
// closed anyway); the keep-alive connection idle longest; of the
// connections still waiting for their first request's header or reading a
// body, the one that has waited longest; and last the connection that has
// been in its current request longest, if that is at least shedBusyAfter.
// A real delivery's header and body arrive together, in milliseconds, and
// it is answered in milliseconds more, so the one that waited longest is
// the slowest and the least likely to be real, and a new connection is
// never the first to go. Only when every connection is busy and none has
// been for shedBusyAfter is the new one answered 503 with Retry-After and
// closed. So connections that a client keeps open, however many and in
// whatever phase, can neither exhaust memory nor keep a place at the cap
// for longer than shedBusyAfter.
type connLimiter struct {
	net.Listener
	connLimits
	metrics *Metrics
	// refusing bounds the goroutines that answer refused connections.
	refusing chan struct{}

	mu       sync.Mutex
	open     int
	answered list.List // *trackedConn in phaseAnswered, longest first
	idle     list.List // *trackedConn in phaseIdle, longest first
	pending  list.List // *trackedConn in phaseNew or phaseReading, longest first
	busy     list.List // *trackedConn in phaseBusy, by the start of their request
}

// maxRefusing bounds the refused connections being answered at once;
// beyond it a refused connection is closed without an answer.
const maxRefusing = 64

func newConnLimiter(ln net.Listener, o connLimits, m *Metrics) *connLimiter {
	return &connLimiter{Listener: ln, connLimits: o.withDefaults(), metrics: m, refusing: make(chan struct{}, maxRefusing)}
}

// trackedConn is a connection the limiter counts.
type trackedConn struct {
	net.Conn
	l     *connLimiter
	phase connPhase     // guarded by l.mu
	elem  *list.Element // in the list of its phase, guarded by l.mu
	// started is when the current request's header was read (phaseBusy,
	// phaseReading), guarded by l.mu.
	started time.Time
	shed    atomic.Bool // closed by the limiter to admit another
	once    sync.Once
}

// Accept admits the next connection, closing another to make room if it
// must, and answers those it cannot admit itself.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, l: l}
		victim, action, ok := l.admit(tc)
		if victim != nil {
			victim.shed.Store(true)
			_ = victim.Conn.Close()
			l.metrics.connShed(context.Background(), action)
		}
		if ok {
			l.metrics.connOpened(context.Background(), 1)
			return tc, nil
		}
		l.metrics.connShed(context.Background(), shedRefused)
		l.refuse(c)
	}
}

// admit counts tc in, after taking out the connection it replaces if the
// cap requires one: the victim, for the caller to close, and why it was
// chosen (one of the shed actions). It reports false when no connection
// could make room.
func (l *connLimiter) admit(tc *trackedConn) (victim *trackedConn, action string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open >= l.max {
		victim, action = l.victimLocked()
		if victim == nil {
			return nil, "", false
		}
		l.forgetLocked(victim)
	}
	l.open++
	tc.phase = phaseNew
	tc.elem = l.pending.PushBack(tc)
	return victim, action, true
}

// victimLocked picks the connection to close for a new one, in the order
// the type's comment gives, or none.
func (l *connLimiter) victimLocked() (*trackedConn, string) {
	if e := l.answered.Front(); e != nil {
		return e.Value.(*trackedConn), shedAnswered
	}
	if e := l.idle.Front(); e != nil {
		return e.Value.(*trackedConn), shedIdle
	}
	if e := l.pending.Front(); e != nil {
		return e.Value.(*trackedConn), shedSlow
	}
	if e := l.busy.Front(); e != nil {
		if c := e.Value.(*trackedConn); l.now().Sub(c.started) >= l.shedBusyAfter {
			return c, shedBusy
		}
	}
	return nil, ""
}

// forgetLocked takes c out of the count, once.
func (l *connLimiter) forgetLocked(c *trackedConn) {
	if c.phase == phaseClosed {
		return
	}
	l.remove(c)
	c.phase = phaseClosed
	l.open--
	l.metrics.connOpened(context.Background(), -1)
}

// listOf is the list of the connections in phase p, nil for none.
func (l *connLimiter) listOf(p connPhase) *list.List {
	switch p {
	case phaseAnswered:
		return &l.answered
	case phaseIdle:
		return &l.idle
	case phaseNew, phaseReading:
		return &l.pending
	case phaseBusy:
		return &l.busy
	}
	return nil
}

// remove takes c out of the list of its phase.
func (l *connLimiter) remove(c *trackedConn) {
	if ls := l.listOf(c.phase); ls != nil && c.elem != nil {
		ls.Remove(c.elem)
	}
	c.elem = nil
}

// set moves c to phase p: the youngest of that phase, except in phaseBusy,
// where it takes its place by the start of its request. A request starts
// when it turns busy from idle or new (net/http has read its header).
func (l *connLimiter) set(c *trackedConn, p connPhase) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.phase == phaseClosed || c.phase == p {
		return
	}
	if p == phaseBusy && (c.phase == phaseIdle || c.phase == phaseNew) {
		c.started = l.now()
	}
	l.remove(c)
	c.phase = p
	ls := l.listOf(p)
	if ls == nil {
		return
	}
	if p != phaseBusy {
		c.elem = ls.PushBack(c)
		return
	}
	// Back from reading a body, a request goes behind those that started
	// before it; a new one is the youngest.
	e := ls.Back()
	for e != nil && e.Value.(*trackedConn).started.After(c.started) {
		e = e.Prev()
	}
	if e == nil {
		c.elem = ls.PushFront(c)
	} else {
		c.elem = ls.InsertAfter(c, e)
	}
}

// Close closes the connection and takes it out of the count.
func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.forgetLocked(c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// state follows net/http's view of each connection (http.Server.ConnState):
// a new or idle connection waits for a request; an active one has one.
// The handler says when a delivery's body is being read (markConn).
func (l *connLimiter) state(c net.Conn, s http.ConnState) {
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	switch s {
	case http.StateNew:
		l.set(tc, phaseNew)
	case http.StateIdle:
		l.set(tc, phaseIdle)
	case http.StateActive:
		l.set(tc, phaseBusy)
	case http.StateHijacked, http.StateClosed:
		_ = tc.Close()
	}
}

// connKey holds a request's *trackedConn in its context.
type connKey struct{}

// context puts the connection in the context of its requests
// (http.Server.ConnContext), for markConn.
func (l *connLimiter) context(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*trackedConn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// markConn tells the limiter what the request's connection does now; it
// does nothing for a connection the limiter does not count (tests serving
// the handler otherwise).
func markConn(r *http.Request, p connPhase) {
	if tc, ok := r.Context().Value(connKey{}).(*trackedConn); ok {
		tc.l.set(tc, p)
	}
}

// connShed reports whether the request's connection was closed to admit
// another.
func connShed(r *http.Request) bool {
	tc, ok := r.Context().Value(connKey{}).(*trackedConn)
	return ok && tc.shed.Load()
}

// refusal503 is the whole answer to a connection refused at the cap.
const refusal503 = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: 18\r\n\r\n{\"status\":\"busy\"}\n"

// refuseWithin bounds the time a refused connection is given to send its
// request's header and read the answer.
const refuseWithin = time.Second

// refuse answers a connection that the cap leaves no room for: it reads
// the request's header (at most MaxHeaderBytes and 4 KiB, within
// refuseWithin), answers 503 with Retry-After so that the sender retries
// (a client that sent nothing yet would take an answer before its request
// for a broken connection), stops writing, and reads what else the client
// sent until it closes or the time is up, so that the client reads the
// answer instead of a reset. At most maxRefusing are answered at once;
// beyond that a connection is closed at once.
func (l *connLimiter) refuse(c net.Conn) {
	select {
	case l.refusing <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(refuseWithin))
		if !readHead(c, MaxHeaderBytes+4096) {
			return
		}
		if _, err := io.WriteString(c, refusal503); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}()
}

// readHead reads from c until the blank line that ends a request's header,
// at most limit bytes; it reports whether the header ended.
func readHead(c net.Conn, limit int) bool {
	buf := make([]byte, 0, 1024)
	chunk := make([]byte, 1024)
	for len(buf) < limit {
		n, err := c.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if bytes.Contains(buf, []byte("\r\n\r\n")) {
			return true
		}
		if err != nil {
			return false
		}
	}
	return false
}
