package codec

import (
	"context"
	"sync"
	"time"
)

// budget counts the bytes that request bodies may hold in memory at once.
// A request takes bytes as its body arrives and gives them back when it is
// answered, so an upload whose bytes trickle in holds only what has come,
// not a place in line.
type budget struct {
	mu    sync.Mutex
	free  int64
	freed chan struct{} // closed, and replaced, whenever bytes come back
}

func newBudget(n int64) *budget {
	return &budget{free: n, freed: make(chan struct{})}
}

// take takes n bytes, waiting at most wait for others to give them back.
// It says false when they did not come back in time or ctx ended, having
// taken nothing.
func (b *budget) take(ctx context.Context, n int64, wait time.Duration) bool {
	freed, ok := b.tryTake(n)
	if ok {
		return true
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-freed:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
		if freed, ok = b.tryTake(n); ok {
			return true
		}
	}
}

// tryTake takes n bytes if they are free; otherwise it returns the channel
// that closes when bytes next come back.
func (b *budget) tryTake(n int64) (<-chan struct{}, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.free >= n {
		b.free -= n
		return nil, true
	}
	return b.freed, false
}

// give gives back n bytes taken earlier and wakes the requests waiting.
func (b *budget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free += n
	close(b.freed)
	b.freed = make(chan struct{})
}
