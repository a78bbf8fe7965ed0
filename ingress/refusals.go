package ingress

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/siteops/siteops/store"
)

// The record of refused deliveries. A delivery the handler refuses is
// counted (siteops_webhook_deliveries_total, siteops_webhook_refusals_total
// by receiver) and logged at a bounded rate, and, so that every replica
// and the CLI see them (`siteops events list --refused`), added to a
// record in the store: one row per receiver, reason and minute, with a
// count, the first and the last refusal, and the event id and type of a
// refused delivery whose signature verified.
//
// Refusing costs the store nothing on the request's way: the handler only
// counts the refusal into a map in memory (noteRefusal). Receiver names
// the list of receivers does not hold (anyone can make them up) are kept
// to RefusedNamesPerMinute names a minute and refusedKeys rows; the rest
// are counted under OtherReceivers. The listed receivers' rows have a
// bound of their own (refusedListedKeys), which made-up names cannot
// fill. A loop of the server (recordRefusals) writes what was counted at
// most once every FlushEvery (a second), as one statement, and prunes the
// record to its age and size once a minute, made-up names' rows first
// (store.PruneRefusals). So a flood of forged deliveries, however large
// and whatever names it makes up, costs the store at most one write a
// second per ingress, of at most refusedKeys rows plus one per reason
// besides the real receivers', and pushes none of theirs out.
//
// Never kept: the body, the headers, the client's address (behind the TLS
// terminator every client is the terminator, and a client's address is
// personal data the record has no use for), a secret, and the sender's
// unsigned svc-event-id and svc-event-type (only a verified body's id and
// type are kept).

// RefusalStore is where the record of refused deliveries is kept
// (store.Store).
type RefusalStore interface {
	RecordRefusals(ctx context.Context, rows []store.RefusedDelivery) error
	PruneRefusals(ctx context.Context, before time.Time, maxRows int) (int64, error)
}

var _ RefusalStore = (*store.Store)(nil)

// Defaults of RefusedOptions.
const (
	// DefaultRefusedRetention is how long the record keeps a row: a week
	// of refusals, enough to see when a sender's trouble began.
	DefaultRefusedRetention = 7 * 24 * time.Hour
	// DefaultRefusedMaxRows bounds the record's rows: a week of a handful
	// of receivers refused for a reason or two every minute.
	DefaultRefusedMaxRows = 10_000
	// DefaultRefusedFlush is how often an ingress writes what it refused.
	DefaultRefusedFlush = time.Second
)

// refusedKeys bounds the rows of unlisted receiver names an ingress holds
// between two writes, and so such rows of one write, besides one row per
// reason for the rest (OtherReceivers).
const refusedKeys = 64

// refusedListedKeys bounds the rows of listed receivers an ingress holds:
// those of a few minutes of every receiver refused for several reasons,
// while the store cannot be written; past it they are counted under
// OtherReceivers too.
const refusedListedKeys = 1024

// RefusedNamesPerMinute bounds the receiver names that the list of
// receivers does not hold (names anyone can make up) that an ingress keeps
// in one minute's rows; the others are counted under OtherReceivers.
const RefusedNamesPerMinute = 16

// refusedPruneEvery is how often an ingress prunes the record.
const refusedPruneEvery = time.Minute

// OtherReceivers stands in the record for the receivers an ingress did not
// name: past its budget of made-up names in a minute, or of rows between
// two writes. No receiver can have the name (receiverName refuses it).
const OtherReceivers = "(other)"

// UnknownReceiverLabel is the receiver label of siteops_webhook_refusals_total
// for every receiver that the list of receivers does not hold, so that
// made-up names never make a series each. No receiver can have the name.
const UnknownReceiverLabel = "_unknown"

// RefusedOptions tune the record of refused deliveries.
type RefusedOptions struct {
	// Store keeps the record; nil keeps none (the refusals are still
	// counted and logged).
	Store RefusalStore
	// Retention is how long a row is kept (DefaultRefusedRetention).
	Retention time.Duration
	// MaxRows bounds the record: the oldest rows past it are pruned
	// (DefaultRefusedMaxRows).
	MaxRows int
	// FlushEvery is how often what was refused is written
	// (DefaultRefusedFlush).
	FlushEvery time.Duration
	// Disabled keeps no record even with a Store (ServerOptions: New
	// sets the Store otherwise).
	Disabled bool
}

func (o RefusedOptions) withDefaults() RefusedOptions {
	if o.Retention <= 0 {
		o.Retention = DefaultRefusedRetention
	}
	if o.MaxRows <= 0 {
		o.MaxRows = DefaultRefusedMaxRows
	}
	if o.FlushEvery <= 0 {
		o.FlushEvery = DefaultRefusedFlush
	}
	if o.Disabled {
		o.Store = nil
	}
	return o
}

// refusedKey is a row of the record.
type refusedKey struct {
	minute   int64 // Unix time of the minute's start
	receiver string
	reason   string
}

// refusalRecord counts refusals in memory between two writes of the
// record.
type refusalRecord struct {
	opts RefusedOptions

	mu      sync.Mutex
	pending map[refusedKey]*store.RefusedDelivery
	// listedRows counts pending's rows of listed receivers.
	listedRows int
	// names are the unlisted receiver names kept in the rows of the
	// minute nameMinute.
	names      map[string]bool
	nameMinute int64
}

func newRefusalRecord(o RefusedOptions) *refusalRecord {
	if o.Store == nil {
		return nil
	}
	return &refusalRecord{opts: o, pending: map[refusedKey]*store.RefusedDelivery{}, names: map[string]bool{}}
}

// note counts one refusal at at. receiver is the name to keep (recordName);
// listed says whether the list of receivers holds it, else it takes one
// of the minute's names, if one is left. eventID and eventType are the
// verified body's, or empty.
func (rr *refusalRecord) note(receiver string, listed bool, reason string, status int, at time.Time, eventID, eventType string) {
	minute := at.Truncate(time.Minute)
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if !listed {
		if m := minute.Unix(); m != rr.nameMinute {
			rr.nameMinute, rr.names = m, map[string]bool{}
		}
		switch {
		case rr.names[receiver]:
		case len(rr.names) < RefusedNamesPerMinute:
			rr.names[receiver] = true
		default:
			receiver = OtherReceivers
		}
	}
	k := refusedKey{minute: minute.Unix(), receiver: receiver, reason: reason}
	row, ok := rr.pending[k]
	if !ok && !rr.room(listed) {
		k.receiver, listed = OtherReceivers, false
		row, ok = rr.pending[k]
	}
	if !ok {
		row = &store.RefusedDelivery{Minute: minute, Receiver: k.receiver, Reason: reason, Status: status, FirstAt: at, LastAt: at, Listed: listed}
		rr.add(k, row)
	}
	row.Count++
	row.FirstAt, row.LastAt = minTime(row.FirstAt, at), maxTime(row.LastAt, at)
	if eventID != "" {
		row.EventID, row.EventType = eventID, eventType
	}
}

// room says whether a new row of a listed receiver, or of another, is
// within its bound.
func (rr *refusalRecord) room(listed bool) bool {
	if listed {
		return rr.listedRows < refusedListedKeys
	}
	return len(rr.pending)-rr.listedRows < refusedKeys
}

// add puts a new row into what is pending.
func (rr *refusalRecord) add(k refusedKey, row *store.RefusedDelivery) {
	rr.pending[k] = row
	if row.Listed {
		rr.listedRows++
	}
}

// take returns what was counted since the last write, and forgets it.
func (rr *refusalRecord) take() map[refusedKey]*store.RefusedDelivery {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	batch := rr.pending
	rr.pending, rr.listedRows = map[refusedKey]*store.RefusedDelivery{}, 0
	return batch
}

// restore counts a batch that could not be written into what is pending,
// within the bound of rows, and returns how many refusals it had to leave
// out.
func (rr *refusalRecord) restore(batch map[refusedKey]*store.RefusedDelivery) (lost int64) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	for k, b := range batch {
		row, ok := rr.pending[k]
		switch {
		case ok:
			row.Count += b.Count
			row.FirstAt, row.LastAt = minTime(row.FirstAt, b.FirstAt), maxTime(row.LastAt, b.LastAt)
			if row.EventID == "" {
				row.EventID, row.EventType = b.EventID, b.EventType
			}
		case rr.room(b.Listed):
			rr.add(k, b)
		default:
			lost += b.Count
		}
	}
	return lost
}

// flush writes what was counted since the last write. When the store
// fails, it is kept for the next write (within the bound of rows).
func (rr *refusalRecord) flush(ctx context.Context) (lost int64, err error) {
	batch := rr.take()
	if len(batch) == 0 {
		return 0, nil
	}
	rows := make([]store.RefusedDelivery, 0, len(batch))
	for _, r := range batch {
		rows = append(rows, *r)
	}
	if err := rr.opts.Store.RecordRefusals(ctx, rows); err != nil {
		return rr.restore(batch), err
	}
	return 0, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// verifiedKey marks a request whose signature verified with the id and
// type of its body (verifiedEvent), for the record of a refusal that
// follows the verification (the store failed).
type verifiedKey struct{}

type verifiedEvent struct{ id, typ string }

// withVerified marks r as verified, its body's event id and type given.
func withVerified(r *http.Request, id, typ string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), verifiedKey{}, verifiedEvent{id: id, typ: typ}))
}

// noteRefusal counts a refused delivery by receiver
// (siteops_webhook_refusals_total) and into the record. Only the delivery
// routes are counted: a request of another route has no receiver.
func (h *Handler) noteRefusal(r *http.Request, status int, reason string) {
	if r.Pattern != routeDeliveries && r.Pattern != routeReceiver {
		return
	}
	raw := r.PathValue("receiver")
	listed := raw == "" || h.listedReceiver(raw)
	label := UnknownReceiverLabel
	if listed {
		label = store.ReceiverName(raw)
	}
	h.opts.Metrics.refusal(r.Context(), label, reason)
	if h.refused == nil {
		return
	}
	v, _ := r.Context().Value(verifiedKey{}).(verifiedEvent)
	h.refused.note(recordName(raw), listed, reason, status, h.opts.Now(), recordValue(v.id), recordValue(v.typ))
}

// listedReceiver reports whether the last list of receivers read holds the
// receiver. It reads only what is in memory.
func (h *Handler) listedReceiver(receiver string) bool {
	h.secrets.mu.Lock()
	defer h.secrets.mu.Unlock()
	_, ok := h.secrets.last.list[receiver]
	return ok
}

// recordName is the name the record keeps of a receiver path: the name
// when it is in form (at most 64 characters of [A-Za-z0-9._-]), else
// quoted, its characters other than printable ASCII replaced with '?', cut
// to 64 bytes in all: a name out of form is no receiver's, and a quote
// tells it from one.
func recordName(receiver string) string {
	if receiver == "" || receiverName.MatchString(receiver) {
		return receiver
	}
	const keep = maxLogValue - 2
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(receiver) && i < keep; i++ {
		c := receiver[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			c = '?'
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}

// recordValue is a verified body's value as the record keeps it: cut to
// 64 bytes as the logs cut the sender's values, with characters that are
// not printable replaced with '?', so that a terminal showing it shows
// text only.
func recordValue(s string) string {
	return clipLog(strings.Map(func(r rune) rune {
		if !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, s))
}

// recordRefusals writes the record of refused deliveries every FlushEvery
// and prunes it every refusedPruneEvery until ctx is done, then writes
// what is left. It returns at once when the handler keeps no record.
func (h *Handler) recordRefusals(ctx context.Context) {
	if h.refused == nil {
		return
	}
	o := h.refused.opts
	t := time.NewTicker(o.FlushEvery)
	defer t.Stop()
	var pruned time.Time
	for {
		select {
		case <-ctx.Done():
			h.flushRefusals(ctx)
			return
		case <-t.C:
		}
		h.flushRefusals(ctx)
		if time.Since(pruned) >= refusedPruneEvery {
			pruned = time.Now()
			h.pruneRefusals(ctx)
		}
	}
}

// pruneRefusals cuts the record to its retention and its size.
func (h *Handler) pruneRefusals(ctx context.Context) {
	o := h.refused.opts
	if _, err := o.Store.PruneRefusals(ctx, h.opts.Now().Add(-o.Retention), o.MaxRows); err != nil && ctx.Err() == nil {
		h.recordFailed(ctx, "pruning the record of refused deliveries failed", err)
	}
}

// refusalWriteTimeout bounds one write of the record.
const refusalWriteTimeout = 2 * time.Second

// flushRefusals writes what was refused since the last write. The write
// runs on its own deadline, apart from ctx's cancellation: a write cut
// short by shutdown may have reached the store and still report failure,
// and the batch kept for the next write would then be counted twice.
func (h *Handler) flushRefusals(ctx context.Context) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refusalWriteTimeout)
	defer cancel()
	lost, err := h.refused.flush(wctx)
	if err == nil {
		return
	}
	args := []any{}
	if lost > 0 {
		args = append(args, "refusals_not_recorded", lost)
	}
	h.recordFailed(ctx, "recording refused deliveries failed; trying again in a second", err, args...)
}

// recordFailed logs a failure of the record at the rate of the store
// failures' lines.
func (h *Handler) recordFailed(ctx context.Context, msg string, err error, args ...any) {
	if ok, dropped := h.errs.allow(); ok {
		args = append(args, "error", clip(err.Error(), 512))
		if dropped > 0 {
			args = append(args, "errors_not_logged", dropped)
		}
		h.opts.Logger.Error(msg, args...)
	} else {
		h.opts.Metrics.errorLogSuppressed(ctx)
	}
}
