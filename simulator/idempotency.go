package simulator

import (
	"net/http"
	"time"
)

type idemKey struct{ apiKey, key string }

// idemClaim is a claimed key in the order the keys were claimed, which is
// the order they expire in.
type idemClaim struct {
	key idemKey
	rec *idemRecord
}

type idemRecord struct {
	fingerprint [32]byte
	inFlight    bool
	resp        response
	at          time.Time
}

// claim looks up a key. It returns the live record if there is one;
// otherwise it records the key as in flight for this request and reports
// claimed.
func (s *Simulator) claim(k idemKey, fp [32]byte) (stored *idemRecord, claimed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if rec, found := s.idem[k]; found {
		if now.Sub(rec.at) < s.cfg.IdempotencyRetention {
			cp := *rec
			return &cp, false
		}
		delete(s.idem, k)
	}
	rec := &idemRecord{fingerprint: fp, inFlight: true, at: now}
	s.idem[k] = rec
	s.idemOrder = append(s.idemOrder, idemClaim{key: k, rec: rec})
	return nil, true
}

// settle stores the answer for replay, or forgets the key when the answer
// says to try again (5xx, 429) so that the retry runs afresh.
func (s *Simulator) settle(k idemKey, resp response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if resp.status >= 500 || resp.status == http.StatusTooManyRequests {
		delete(s.idem, k)
		return
	}
	if rec := s.idem[k]; rec != nil {
		rec.inFlight = false
		rec.resp = resp
	}
}

// expireIdempotencyLocked drops keys older than the retention; run on
// every create so that memory stays bounded by the retention. Keys are
// claimed in time order, so it reads only the oldest claims, and stops at
// the first that is still kept (its own time not up yet, or its request
// still in flight): the work is the keys that expire, not every key held.
func (s *Simulator) expireIdempotencyLocked(now time.Time) {
	for len(s.idemOrder) > 0 {
		c := s.idemOrder[0]
		if s.idem[c.key] == c.rec { // not forgotten or claimed again since
			if c.rec.inFlight || now.Sub(c.rec.at) < s.cfg.IdempotencyRetention {
				return
			}
			delete(s.idem, c.key)
		}
		s.idemOrder[0] = idemClaim{}
		s.idemOrder = s.idemOrder[1:]
	}
}
