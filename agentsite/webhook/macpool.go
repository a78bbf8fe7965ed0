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

// macPools holds, per secret, a pool of macStates keyed with it. Keyed
// HMAC states are as sensitive as the secret they were made from; they
// live in this process's memory as the secrets themselves do, and are
// dropped with their pool when the table is emptied or by the garbage
// collector (sync.Pool).
type macPools struct {
	pools sync.Map // secret string → *sync.Pool of *macState

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
func (p *macPools) pool(secret string) *sync.Pool {
	if v, ok := p.pools.Load(secret); ok {
		return v.(*sync.Pool)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if v, ok := p.pools.Load(secret); ok {
		return v.(*sync.Pool)
	}
	if p.n >= maxPooledSecrets {
		p.pools.Clear()
		p.n = 0
	}
	pool := &sync.Pool{New: func() any {
		return &macState{h: hmac.New(sha256.New, []byte(secret))}
	}}
	p.pools.Store(secret, pool)
	p.n++
	return pool
}

// mac returns the HMAC-SHA256 under secret of t, a period and body, with a
// pooled state.
func mac(secret, t string, body []byte) [sha256.Size]byte {
	pool := macs.pool(secret)
	s := pool.Get().(*macState)
	sum := s.sum(t, body)
	pool.Put(s)
	return sum
}
