package ingress

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// errBudget means that a body's next bytes would take the bodies being read
// past BodyBudget.
var errBudget = errors.New("body_budget")

// byteBudget counts bytes held across requests against a maximum.
type byteBudget struct {
	max int64

	mu   sync.Mutex
	used int64
}

// take reserves n bytes, or reports that they would exceed the budget.
func (b *byteBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

// give returns n bytes to the budget.
func (b *byteBudget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// inUse is how many bytes are reserved.
func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// firstRead is the buffer a body starts with (or its declared length, when
// less): a whole delivery of the contract's kind.
const firstRead = 1 << 10

// readBody reads a delivery's body as its bytes arrive, within bodyTime of
// its declared length, and at most MaxBody bytes (net/http ends a body at
// its declared length). The buffer grows only as bytes arrive, doubling,
// never to the declared length before it came: a client that declares
// 256 KiB and sends nothing costs 1 KiB. A body that declares more than
// SmallBody or no length takes every byte its buffer grows by from
// BodyBudget; readBody returns how many it took, which the caller gives
// back when done with the body (readBody gives them back itself on an
// error).
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) (body []byte, taken int64, err error) {
	// Not every ResponseWriter can (httptest's cannot); the server's
	// ReadTimeout still bounds the read then.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(h.bodyTime(r.ContentLength)))
	declared := r.ContentLength
	limit := h.opts.MaxBody + 1 // one byte more than the cap shows an undeclared body over it
	if declared >= 0 {
		limit = declared
	}
	counted := declared < 0 || declared > SmallBody
	defer func() {
		if err != nil {
			h.budget.give(taken)
			taken = 0
		}
	}()
	var buf []byte
	for int64(len(buf)) < limit {
		if len(buf) == cap(buf) {
			grow := min(max(2*int64(cap(buf)), firstRead), limit)
			if counted {
				if !h.budget.take(grow - int64(cap(buf))) {
					return nil, taken, errBudget
				}
				taken += grow - int64(cap(buf))
			}
			next := make([]byte, len(buf), grow)
			copy(next, buf)
			buf = next
		}
		n, rerr := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return nil, taken, rerr
		}
	}
	if int64(len(buf)) > h.opts.MaxBody {
		return nil, taken, &http.MaxBytesError{Limit: h.opts.MaxBody}
	}
	return buf, taken, nil
}

// bodyTime is how long a body of n declared bytes (-1: undeclared) may take
// to arrive: BodyTimeout, plus a second per BodyRate bytes.
func (h *Handler) bodyTime(n int64) time.Duration {
	if n < 0 || n > h.opts.MaxBody {
		n = h.opts.MaxBody
	}
	return h.opts.BodyTimeout + time.Duration(float64(n)/float64(h.opts.BodyRate)*float64(time.Second))
}
