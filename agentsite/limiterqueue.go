package agentsite

import "container/list"

// waiter is one caller of Limiter.Wait waiting for a token.
type waiter struct {
	p       Priority
	granted bool
	// wake is told (without blocking: it holds one) that something that
	// concerns the waiter changed: it was granted a token, or it became
	// the first in line and must watch for the next token.
	wake chan struct{}
	elem *list.Element
	line *keyLine
}

func (w *waiter) nudge() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// keyLine is the waiters of one key within a class, first come first
// served.
type keyLine struct {
	key     string
	waiters list.List // of *waiter
}

// classLine is the key lines of one class, served in turn: one token to
// each key that waits, then round again.
type classLine struct {
	lines map[string]*keyLine
	ring  []*keyLine
	turn  int // the place in ring served next
}

// waitQueue is every waiter of a Limiter: the classes in order, the keys
// of a class in turn. It is guarded by the Limiter's mutex.
type waitQueue struct {
	classes [ClassBulk + 1]classLine // by Class; 0 unused
	n       int
}

func (q *waitQueue) push(p Priority) *waiter {
	c := &q.classes[p.Class]
	if c.lines == nil {
		c.lines = map[string]*keyLine{}
	}
	line := c.lines[p.Key]
	if line == nil {
		line = &keyLine{key: p.Key}
		c.lines[p.Key] = line
		// A key that starts waiting is served after the ones whose turn
		// comes before it in this round: at the end of the round.
		if c.turn == 0 {
			c.ring = append(c.ring, line)
		} else {
			c.ring = append(c.ring[:c.turn], append([]*keyLine{line}, c.ring[c.turn:]...)...)
			c.turn++
		}
	}
	w := &waiter{p: p, wake: make(chan struct{}, 1), line: line}
	w.elem = line.waiters.PushBack(w)
	q.n++
	return w
}

// head is the waiter that pop would return, nil when none waits.
func (q *waitQueue) head() *waiter {
	for i := range q.classes {
		c := &q.classes[i]
		if len(c.ring) > 0 {
			return c.ring[c.turn].waiters.Front().Value.(*waiter)
		}
	}
	return nil
}

// pop takes the head out of the queue.
func (q *waitQueue) pop() *waiter {
	w := q.head()
	if w == nil {
		return nil
	}
	c := &q.classes[w.p.Class]
	c.turn++ // the next key's turn, unless this one leaves the ring
	q.remove(w)
	if len(c.ring) > 0 {
		c.turn %= len(c.ring)
	}
	return w
}

// remove takes w out of the queue wherever it stands.
func (q *waitQueue) remove(w *waiter) {
	if w.elem == nil {
		return
	}
	line := w.line
	line.waiters.Remove(w.elem)
	w.elem = nil
	q.n--
	if line.waiters.Len() > 0 {
		return
	}
	c := &q.classes[w.p.Class]
	delete(c.lines, line.key)
	for i, l := range c.ring {
		if l != line {
			continue
		}
		c.ring = append(c.ring[:i], c.ring[i+1:]...)
		if i < c.turn {
			c.turn--
		}
		break
	}
	if c.turn >= len(c.ring) {
		c.turn = 0
	}
}

// ahead counts the waiters that the queue serves before w, as it stands:
// every waiter of a more urgent class, and within w's class the turns of
// the other keys until w's own comes.
func (q *waitQueue) ahead(w *waiter) int {
	n := 0
	for i := 1; i < int(w.p.Class); i++ {
		for _, l := range q.classes[i].ring {
			n += l.waiters.Len()
		}
	}
	j := 0 // w's place in its own line
	for e := w.line.waiters.Front(); e != nil && e != w.elem; e = e.Next() {
		j++
	}
	n += j
	c := &q.classes[w.p.Class]
	// Round r serves one waiter of every line longer than r, from turn
	// on; w goes in round j. The lines served before w's in a round give
	// j+1 waiters ahead of it, the lines after it j.
	before := true
	for k := range c.ring {
		l := c.ring[(c.turn+k)%len(c.ring)]
		if l == w.line {
			before = false
			continue
		}
		if before {
			n += min(l.waiters.Len(), j+1)
		} else {
			n += min(l.waiters.Len(), j)
		}
	}
	return n
}
