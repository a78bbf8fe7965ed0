package webhookingress

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
	phaseClosed
)

// connLimiter admits at most max connections on the webhook port. At the
// cap, a new connection is admitted in place of an open one, in this
// order: the keep-alive connection idle longest; then, of the connections
// still waiting for their first request's header or reading a body, the
// one that has waited longest. A real delivery's header and body arrive
// together, in milliseconds, so the one that waited longest is the slowest
// and the least likely to be real, and a new connection is never the first
// to go. Only when every connection is busy verifying, recording or
// answering is the new one answered 503 with Retry-After and closed. So
// idle and slow connections, however many, can neither exhaust memory nor
// shut out a delivery.
type connLimiter struct {
	net.Listener
	max     int
	metrics *Metrics
	// refusing bounds the goroutines that answer refused connections.
	refusing chan struct{}

	mu      sync.Mutex
	open    int
	idle    list.List // *trackedConn in phaseIdle, longest first
	pending list.List // *trackedConn in phaseNew or phaseReading, longest first
}

// maxRefusing bounds the refused connections being answered at once;
// beyond it a refused connection is closed without an answer.
const maxRefusing = 64

func newConnLimiter(ln net.Listener, max int, m *Metrics) *connLimiter {
	return &connLimiter{Listener: ln, max: max, metrics: m, refusing: make(chan struct{}, maxRefusing)}
}

// trackedConn is a connection the limiter counts.
type trackedConn struct {
	net.Conn
	l     *connLimiter
	phase connPhase     // guarded by l.mu
	elem  *list.Element // in l.idle or l.pending, guarded by l.mu
	shed  atomic.Bool   // closed by the limiter to admit another
	once  sync.Once
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
		l.metrics.connShed(context.Background(), "refused")
		l.refuse(c)
	}
}

// admit counts tc in, after taking out the connection it replaces if the
// cap requires one: the victim, for the caller to close, and why it was
// chosen (closed_idle, closed_slow). It reports false when no connection
// could make room.
func (l *connLimiter) admit(tc *trackedConn) (victim *trackedConn, action string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open >= l.max {
		e := l.idle.Front()
		action = "closed_idle"
		if e == nil {
			e, action = l.pending.Front(), "closed_slow"
		}
		if e == nil {
			return nil, "", false
		}
		victim = e.Value.(*trackedConn)
		l.forgetLocked(victim)
	}
	l.open++
	tc.phase = phaseNew
	tc.elem = l.pending.PushBack(tc)
	return victim, action, true
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

// remove takes c out of the list of its phase.
func (l *connLimiter) remove(c *trackedConn) {
	switch c.phase {
	case phaseIdle:
		l.idle.Remove(c.elem)
	case phaseNew, phaseReading:
		l.pending.Remove(c.elem)
	}
	c.elem = nil
}

// set moves c to phase p, as the youngest of that phase.
func (l *connLimiter) set(c *trackedConn, p connPhase) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.phase == phaseClosed || c.phase == p {
		return
	}
	l.remove(c)
	c.phase = p
	switch p {
	case phaseIdle:
		c.elem = l.idle.PushBack(c)
	case phaseNew, phaseReading:
		c.elem = l.pending.PushBack(c)
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
