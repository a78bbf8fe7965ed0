package relay

import (
	"slices"
	"sync"
	"time"

	"github.com/siteops/siteops/store"
)

// coalescer holds back the groups (a Batch route's events of one site,
// lead.created) whose target was signalled within the interval. Its memory
// is bounded: a group is remembered only for one interval after its last
// signal, and it holds fewer than a batch of events in all: at a batch it
// releases held events early, rather than claim batch after batch only to
// hold them. New makes its maps.
type coalescer struct {
	mu       sync.Mutex
	signaled map[string]time.Time // group key → its last signal, for one interval
	held     map[string]*job      // group key → events held back
	due      map[string]time.Time // group key → when its held events go
	count    int                  // events held
}

// hold takes the jobs of a claim and returns those to dispatch now: every
// job but the groups signalled within interval, which are held (with any
// held before) until their interval is up; and the held jobs that are due,
// or that must go to hold fewer than limit events. It counts the groups it
// returns as signalled now.
func (c *coalescer) hold(js []*job, now time.Time, interval time.Duration, limit int) []*job {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, at := range c.signaled {
		if now.Sub(at) >= interval && c.held[key] == nil {
			delete(c.signaled, key)
		}
	}
	var out []*job
	for _, j := range js {
		if j.key == "" {
			out = append(out, j)
			continue
		}
		h := c.held[j.key]
		if h == nil {
			at, ok := c.signaled[j.key]
			if !ok || now.Sub(at) >= interval {
				c.signaled[j.key] = now
				out = append(out, j)
				continue
			}
			h = &job{route: j.route, site: j.site, key: j.key, startBy: j.startBy}
			c.held[j.key], c.due[j.key] = h, at.Add(interval)
		}
		c.count += h.add(j.evs)
		if j.startBy.Before(h.startBy) {
			h.startBy = j.startBy
		}
	}
	for key, h := range c.held {
		if now.Before(c.due[key]) && c.count < limit {
			continue
		}
		delete(c.held, key)
		delete(c.due, key)
		c.count -= len(h.evs)
		c.signaled[key] = now
		out = append(out, h)
	}
	return out
}

// add appends the events not already in j and says how many it added: a
// held event whose lease ran out (a slow relay) may be claimed again.
func (j *job) add(evs []store.InboxEvent) int {
	n := 0
	for _, ev := range evs {
		if !slices.ContainsFunc(j.evs, func(o store.InboxEvent) bool { return o.EventID == ev.EventID }) {
			j.evs = append(j.evs, ev)
			n++
		}
	}
	return n
}

// nextDue is when the earliest held events go; false when none are held.
func (c *coalescer) nextDue() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first time.Time
	for _, at := range c.due {
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first, !first.IsZero()
}
