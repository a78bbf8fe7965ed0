package agentsite

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The queue serves the most urgent class first and, within a class, the
// keys in turn; ahead counts exactly the waiters served before each one.
func TestWaitQueueOrderAndAhead(t *testing.T) {
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			var q waitQueue
			var all []*waiter
			// Pushes and pops interleaved, so that turns start mid-round.
			for range 40 {
				if len(all) > 0 && r.IntN(4) == 0 {
					w := q.pop()
					all = remove(all, w)
					continue
				}
				p := Priority{Class: []Class{ClassPlaybook, ClassOnboarding, ClassBulk}[r.IntN(3)], Key: fmt.Sprint("k", r.IntN(4))}
				all = append(all, q.push(p))
			}
			if r.IntN(2) == 0 && len(all) > 0 { // a waiter leaves from the middle
				w := all[r.IntN(len(all))]
				q.remove(w)
				all = remove(all, w)
			}
			want := map[*waiter]int{}
			for _, w := range all {
				want[w] = q.ahead(w)
			}
			var lastClass Class
			for i := 0; q.n > 0; i++ {
				w := q.pop()
				if w.p.Class < lastClass {
					t.Fatalf("pop %d is class %d after class %d", i, w.p.Class, lastClass)
				}
				lastClass = w.p.Class
				if want[w] != i {
					t.Fatalf("a waiter of %+v was served %dth, ahead said %d", w.p, i, want[w])
				}
			}
		})
	}
}

func TestWaitQueueKeysTakeTurns(t *testing.T) {
	var q waitQueue
	for range 5 {
		q.push(Priority{Class: ClassBulk, Key: "big"})
	}
	q.push(Priority{Class: ClassBulk, Key: "small"})
	q.push(Priority{Class: ClassBulk, Key: "small"})
	var got string
	for q.n > 0 {
		got += q.pop().p.Key[:1]
	}
	if want := "bsbsbbb"; got != want {
		t.Errorf("served %s, want %s (b = big, s = small)", got, want)
	}
}

func remove(ws []*waiter, w *waiter) []*waiter {
	for i, x := range ws {
		if x == w {
			return append(ws[:i], ws[i+1:]...)
		}
	}
	return ws
}
