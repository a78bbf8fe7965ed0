package simulator

import (
	"net/http"
	"time"
)

type idemKey struct{ apiKey, key string }

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
	s.idem[k] = &idemRecord{fingerprint: fp, inFlight: true, at: now}
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

// expireIdempotency drops keys older than the retention; run on every
// create so that memory stays bounded by the retention.
func (s *Simulator) expireIdempotencyLocked(now time.Time) {
	for k, rec := range s.idem {
		if !rec.inFlight && now.Sub(rec.at) >= s.cfg.IdempotencyRetention {
			delete(s.idem, k)
		}
	}
}
