package ingress

import (
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// maxLogValue bounds a sender-controlled value (svc-event-id,
// svc-event-type, the path) in a log line: an event id is evt_ and a few
// dozen characters, and one request must not add more to the log than a
// line's worth.
const maxLogValue = 64

// clipLog shortens a value the sender controls for a log line.
func clipLog(s string) string { return clip(s, maxLogValue) }

// clip shortens s to at most n bytes, on a rune boundary, and says how
// much it left out.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…(+" + strconv.Itoa(len(s)-cut) + " bytes)"
}

// sampler lets at most perSecond log lines through in each second and
// counts the others, so that a flood of refused requests cannot flood the
// log; the metrics still count every request.
type sampler struct {
	perSecond int
	now       func() time.Time

	mu      sync.Mutex
	second  int64 // the Unix second being counted
	n       int   // lines let through in it
	dropped int   // lines left out since the last one let through
}

// allow reports whether a line may be logged now and, when it may, how
// many were left out before it.
func (s *sampler) allow() (bool, int) {
	sec := s.now().Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	if sec != s.second {
		s.second, s.n = sec, 0
	}
	if s.n >= s.perSecond {
		s.dropped++
		return false, 0
	}
	s.n++
	dropped := s.dropped
	s.dropped = 0
	return true, dropped
}
