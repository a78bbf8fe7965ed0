// Package ingresstest holds what the ingress's tests, the end-to-end tests
// and the benchmarks share to attack and observe a webhook ingress: a slow
// forged uploader and a store that counts the reads a request causes.
package ingresstest

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/siteops/siteops/store"
)

// SlowForgedUpload is one attacker of the kind the checks before the body
// cannot stop: it sends, to addr's POST /webhooks, a delivery whose
// svc-signature is well formed and current (but whose MAC is made up) for
// a receiver that exists, declaring a body of declared bytes, and uploads
// that body a byte every 100 ms. When the server closes the connection it
// reports how long it was held on held (without blocking) and starts
// again, until ctx is done; a refused connection is tried again 200 ms
// later.
func SlowForgedUpload(ctx context.Context, addr string, declared int, held chan<- time.Duration) {
	for ctx.Err() == nil {
		conn, err := dial(ctx, addr)
		if err != nil {
			continue
		}
		start := time.Now()
		closed := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, conn); close(closed) }()
		err = forgedHead(conn, declared)
		tick := time.NewTicker(100 * time.Millisecond)
	trickle:
		for sent := 0; err == nil && sent < declared-1; sent++ {
			select {
			case <-ctx.Done():
				break trickle
			case <-closed:
				select {
				case held <- time.Since(start):
				default:
				}
				break trickle
			case <-tick.C:
				_, err = conn.Write([]byte("a"))
			}
		}
		tick.Stop()
		_ = conn.Close()
		<-closed
	}
}

// SilentForgedUpload is SlowForgedUpload sending no byte of the body: the
// delivery's head (a current timestamp, a made-up v1 of 64 hex digits, the
// declared Content-Length) and then nothing, until the server closes the
// connection. It runs in one goroutine, so that a test can run thousands
// of them beside the server without starving it.
func SilentForgedUpload(ctx context.Context, addr string, declared int, held chan<- time.Duration) {
	var buf [512]byte
	for ctx.Err() == nil {
		conn, err := dial(ctx, addr)
		if err != nil {
			continue
		}
		stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
		start := time.Now()
		err = forgedHead(conn, declared)
		for err == nil {
			_, err = conn.Read(buf[:])
		}
		if ctx.Err() == nil {
			select {
			case held <- time.Since(start):
			default:
			}
		}
		stop()
		_ = conn.Close()
	}
}

// dial connects to addr; when it cannot, it waits 200 ms (or until ctx is
// done) before it returns the error.
func dial(ctx context.Context, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return conn, err
}

// forgedHead writes the head of a forged delivery declaring a body of
// declared bytes: a current timestamp and a v1 of 64 hex digits that no
// secret made.
func forgedHead(conn net.Conn, declared int) error {
	_, err := fmt.Fprintf(conn, "POST /webhooks HTTP/1.1\r\nHost: ingress\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"+
		"svc-event-id: evt_forged\r\nsvc-event-type: lead.created\r\nsvc-signature: t=%d,v1=%s\r\n\r\n", declared, time.Now().Unix(), strings.Repeat("ab", 32))
	return err
}

// CountingStore counts the store reads a delivery can cause before it
// verifies: the list of every receiver, and (reads the ingress no longer
// makes per request, counted so that a test sees if it did) a receiver's
// secrets and whether it expects a new one.
type CountingStore struct {
	*store.Store
	Lists        atomic.Int64 // Receivers calls
	Secrets      atomic.Int64 // ActiveSecrets calls
	Expectations atomic.Int64 // SecretExpectation calls
}

// Receivers counts the call and asks the store.
func (c *CountingStore) Receivers(ctx context.Context) (store.Receivers, error) {
	c.Lists.Add(1)
	return c.Store.Receivers(ctx)
}

// ActiveSecrets counts the call and asks the store.
func (c *CountingStore) ActiveSecrets(ctx context.Context, receiver string) (store.ActiveSet, error) {
	c.Secrets.Add(1)
	return c.Store.ActiveSecrets(ctx, receiver)
}

// SecretExpectation counts the call and asks the store.
func (c *CountingStore) SecretExpectation(ctx context.Context, receiver string) (store.Expectation, error) {
	c.Expectations.Add(1)
	return c.Store.SecretExpectation(ctx, receiver)
}

// Calls is how many reads were counted in all.
func (c *CountingStore) Calls() int64 {
	return c.Lists.Load() + c.Secrets.Load() + c.Expectations.Load()
}

// Drain takes what SlowForgedUpload reported on held so far, without
// waiting: how many connections were cut, and the shortest and longest
// time one was held.
func Drain(held <-chan time.Duration) (n int, shortest, longest time.Duration) {
	for {
		select {
		case d := <-held:
			n, longest = n+1, max(longest, d)
			if shortest == 0 || d < shortest {
				shortest = d
			}
		default:
			return n, shortest, longest
		}
	}
}
