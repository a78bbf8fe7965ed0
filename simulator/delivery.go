package simulator

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
)

// Delivery rules of the sender.
const (
	MaxAttempts      = 8
	FirstBackoff     = 2 * time.Second
	MaxBackoff       = time.Hour
	DeliveryUA       = "Service-Webhooks/1.0"
	backoffJitterPct = 0.25
)

type eventRecord struct {
	Envelope webhook.Envelope `json:"envelope"`
	body     []byte
}

// DeliveryRecord is one delivery attempt.
type DeliveryRecord struct {
	At         time.Time         `json:"at"`
	EventID    string            `json:"event_id"`
	EventType  webhook.EventType `json:"event_type"`
	EndpointID string            `json:"endpoint_id"`
	Attempt    int               `json:"attempt"`
	StatusCode int               `json:"status_code,omitempty"`
	Outcome    string            `json:"outcome"` // succeeded, failed, abandoned
	Error      string            `json:"error,omitempty"`
	Duplicate  bool              `json:"duplicate,omitempty"`
}

type delivery struct {
	event      eventRecord
	endpointID string
	attempt    int
	duplicate  bool
}

// Events returns every event emitted so far, oldest first.
func (s *Simulator) Events() []webhook.Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]webhook.Envelope, len(s.events))
	for i, e := range s.events {
		out[i] = e.Envelope
	}
	return out
}

// Deliveries returns every delivery attempt so far, oldest first.
func (s *Simulator) Deliveries() []DeliveryRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]DeliveryRecord(nil), s.deliveries...)
}

func newEventID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return webhook.EventIDPrefix + hex.EncodeToString(b[:])
}

// emitLocked records an event and schedules its deliveries to every enabled
// endpoint subscribed to its type. s.mu is held.
func (s *Simulator) emitLocked(t webhook.EventType, data any) {
	raw, _ := json.Marshal(data)
	env := webhook.Envelope{ID: newEventID(), Type: t, CreatedAt: s.now().UTC().Truncate(time.Millisecond), Data: raw}
	body, _ := json.Marshal(env)
	ev := eventRecord{Envelope: env, body: body}
	s.events = appendCapped(s.events, ev)
	f := s.faults
	for _, e := range s.endpoints {
		if e.Status != "enabled" || !e.subscribed(string(t)) {
			continue
		}
		s.scheduleFirst(delivery{event: ev, endpointID: e.ID, attempt: 1}, f)
		if s.chance(f.DuplicateRate) {
			s.scheduleFirst(delivery{event: ev, endpointID: e.ID, attempt: 1, duplicate: true}, f)
		}
	}
}

func (s *Simulator) scheduleFirst(d delivery, f Faults) {
	var wait time.Duration
	if f.ReorderWindow > 0 {
		wait += time.Duration(s.float() * float64(f.ReorderWindow))
	}
	if s.chance(f.DelayRate) {
		wait += time.Duration(f.Delay)
	}
	s.after(s.scaled(wait), func() { s.attempt(d) })
}

// backoff is the wait before attempt n+1 after attempt n failed: 2 s
// doubling, ±25 % jitter, capped at 1 h, then scaled.
func (s *Simulator) backoff(n int) time.Duration {
	d := FirstBackoff << (n - 1)
	if d > MaxBackoff || d <= 0 {
		d = MaxBackoff
	}
	jitter := 1 + backoffJitterPct*(2*s.float()-1)
	d = min(time.Duration(float64(d)*jitter), MaxBackoff)
	return s.scaled(d)
}

func (s *Simulator) attempt(d delivery) {
	// At most MaxConcurrentDeliveries attempts are in flight; the rest
	// wait here, before their timeout starts.
	select {
	case s.sending <- struct{}{}:
	case <-s.ctx.Done():
		return
	}
	s.mu.Lock()
	e := s.endpoints[d.endpointID]
	if e == nil {
		s.mu.Unlock()
		<-s.sending
		return // deleted: its pending deliveries stop
	}
	target, secret := e.URL, e.secret
	s.mu.Unlock()

	status, err := s.send(target, secret, d.event)
	<-s.sending
	rec := DeliveryRecord{At: s.now().UTC(), EventID: d.event.Envelope.ID, EventType: d.event.Envelope.Type, EndpointID: d.endpointID, Attempt: d.attempt, StatusCode: status, Duplicate: d.duplicate}
	switch {
	case err == nil && status >= 200 && status <= 299:
		rec.Outcome = "succeeded"
	case err != nil:
		rec.Outcome, rec.Error = "failed", err.Error()
	case status >= 300 && status <= 399:
		rec.Outcome, rec.Error = "failed", fmt.Sprintf("redirect %d not followed; register the final URL", status)
	default:
		rec.Outcome, rec.Error = "failed", fmt.Sprintf("receiver answered %d", status)
	}
	if s.ctx.Err() != nil {
		return // closing: the attempt was cut short, not failed
	}
	retry := rec.Outcome == "failed" && d.attempt < MaxAttempts
	if rec.Outcome == "failed" && !retry {
		rec.Outcome = "abandoned"
	}

	s.mu.Lock()
	s.deliveries = appendCapped(s.deliveries, rec)
	if e := s.endpoints[d.endpointID]; e != nil {
		e.LastDelivery = &agentsite.DeliveryInfo{At: rec.At, EventID: rec.EventID, Outcome: rec.Outcome, StatusCode: rec.StatusCode}
		if rec.Error != "" {
			msg := rec.Error
			e.LastError = &msg
		}
	}
	s.mu.Unlock()
	s.log.Info("webhook delivery", "event_id", rec.EventID, "event_type", rec.EventType, "endpoint_id", rec.EndpointID,
		"attempt", rec.Attempt, "outcome", rec.Outcome, "status", rec.StatusCode, "error", rec.Error)

	if retry {
		d.attempt++
		s.after(s.backoff(d.attempt-1), func() { s.attempt(d) })
	}
}

// send makes one signed POST of the event to target.
func (s *Simulator) send(target, secret string, ev eventRecord) (int, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.DeliveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(ev.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", DeliveryUA)
	req.Header.Set("svc-event-id", ev.Envelope.ID)
	req.Header.Set("svc-event-type", string(ev.Envelope.Type))
	req.Header.Set("svc-signature", webhook.Sign(secret, s.now(), ev.body))
	resp, err := s.sender.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	var sink [512]byte
	for {
		if _, err := resp.Body.Read(sink[:]); err != nil {
			break
		}
	}
	return resp.StatusCode, nil
}

// newSender builds the delivery client: the timeout, no redirects, no
// proxy, and an address check at dial time: the host is resolved again for
// every connection and every address must still be allowed, so a name that
// resolved to a public address at registration cannot be rebound to a
// private one. The connection goes to the address that was checked.
func (s *Simulator) newSender() *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		var addrs []netip.Addr
		switch a, err := netip.ParseAddr(host); {
		case err == nil:
			addrs = []netip.Addr{a}
		case s.cfg.AllowLoopbackReceivers && isLoopbackHost(host):
			addrs = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
		default:
			if addrs, err = s.cfg.Resolver.LookupNetIP(ctx, "ip", host); err != nil {
				return nil, fmt.Errorf("delivery refused: resolving %s: %w", host, err)
			}
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("delivery refused: %s resolves to no address", host)
		}
		for _, a := range addrs {
			allowedLoopback := s.cfg.AllowLoopbackReceivers && loopbackAddress(a)
			if ok, why := addressVerdict(a); !ok && !allowedLoopback {
				return nil, fmt.Errorf("delivery refused: %s resolves to %s, which is not a public address: %s", host, a, why)
			}
		}
		return dialer.DialContext(ctx, network, net.JoinHostPort(addrs[0].String(), port))
	}
	return &http.Client{
		Timeout:       s.cfg.DeliveryTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         dial,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     30 * time.Second,
		},
	}
}
