package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"
)

// maxPooledSecrets bounds how many secrets keep pooled HMAC states. The
// secrets come from siteops' own configuration and store, a few per
// receiver, so the bound is never reached in use; it is there so that a
// caller passing ever new secrets (a fuzzer, a bug upstream) cannot grow
// the table without limit. Adding a secret past it empties the table,
// which then fills again with the secrets still in use.
const maxPooledSecrets = 256

// macState is one keyed HMAC-SHA256 with the scratch space that a MAC over
// the timestamp text, a period and the body needs, so that computing one
// allocates nothing: the text is copied into buf instead of being
// converted to a []byte, and the sum is written into out, which lives on
// the heap with the state, instead of into a fresh slice.
type macState struct {
	h   hash.Hash
	buf [32]byte
	out [sha256.Size]byte
}

// sum returns the MAC of t, a period and body. Reset restores the keyed
// state that crypto/hmac saved the first time, so no key block is hashed
// again.
func (s *macState) sum(t string, body []byte) [sha256.Size]byte {
	s.h.Reset()
	// t is at most 18 digits when it comes from ParseHeader; a Header built
	// by hand may hold a longer text, which is written in pieces.
	for len(t) >= len(s.buf) {
		n := copy(s.buf[:], t)
		s.h.Write(s.buf[:n])
		t = t[n:]
	}
	n := copy(s.buf[:], t)
	s.buf[n] = '.'
	s.h.Write(s.buf[:n+1])
	s.h.Write(body)
	s.h.Sum(s.out[:0])
	return s.out
}

// maxIdleStates bounds the idle states kept per secret. Each verification
// running at once with a secret holds a state of its own; past this many,
// the extra ones are made for the call and left to the garbage collector.
const maxIdleStates = 16

// macPool keeps the idle states keyed with one secret. It is a plain
// stack under a mutex rather than a sync.Pool: a sync.Pool is emptied by
// every other garbage collection, and under the race detector drops a
// quarter of what is put back, so verification would allocate now and
// then, and TestVerifyAllocations could not hold it to its bound under
// -race, which is how the project's tests run. The lock is held for a few
// instructions, against a microsecond of hashing per MAC.
type macPool struct {
	secret string

	mu   sync.Mutex
	idle []*macState
}

func newMACPool(secret string) *macPool {
	return &macPool{secret: secret, idle: make([]*macState, 0, maxIdleStates)}
}

// get returns an idle state, or a new one keyed with the pool's secret.
func (p *macPool) get() *macState {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		s := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return s
	}
	p.mu.Unlock()
	return &macState{h: hmac.New(sha256.New, []byte(p.secret))}
}

// put keeps s for the next caller, unless maxIdleStates are kept already.
func (p *macPool) put(s *macState) {
	p.mu.Lock()
	if len(p.idle) < cap(p.idle) {
		p.idle = append(p.idle, s)
	}
	p.mu.Unlock()
}

// macPools holds a macPool per secret. Keyed HMAC states are as sensitive
// as the secret they were made from; they live in this process's memory as
// the secrets themselves do, until the table is emptied.
type macPools struct {
	pools sync.Map // secret string → *macPool

	// mu serialises adding a secret, so that n counts the table exactly;
	// looking one up takes no lock.
	mu sync.Mutex
	n  int
}

// macs is the process's table: the states are keyed by the secret alone, so
// every caller can share them.
var macs macPools

// pool returns the pool of states keyed with secret, adding it to the
// table the first time.
func (p *macPools) pool(secret string) *macPool {
	if v, ok := p.pools.Load(secret); ok {
		return v.(*macPool)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if v, ok := p.pools.Load(secret); ok {
		return v.(*macPool)
	}
	if p.n >= maxPooledSecrets {
		p.pools.Clear()
		p.n = 0
	}
	pool := newMACPool(secret)
	p.pools.Store(secret, pool)
	p.n++
	return pool
}

// mac returns the HMAC-SHA256 under secret of t, a period and body, with a
// pooled state.
func mac(secret, t string, body []byte) [sha256.Size]byte {
	pool := macs.pool(secret)
	s := pool.get()
	sum := s.sum(t, body)
	pool.put(s)
	return sum
}
