package inbox

import (
	"context"
	"time"

	"github.com/siteops/siteops/store"
)

// RefusedStore is the part of the store `siteops events list --refused`
// reads.
type RefusedStore interface {
	RefusedDeliveries(ctx context.Context, f store.RefusedFilter) ([]store.RefusedDelivery, error)
}

var _ RefusedStore = (*store.Store)(nil)

// Refused is one row of the record of refused deliveries as the inbox
// tools show it: the deliveries to one receiver refused for one reason in
// one minute.
type Refused struct {
	Minute time.Time `json:"minute"`
	// Receiver is the receiver's name: default for POST /webhooks, a name
	// out of form quoted, OtherReceivers for names past an ingress's
	// budget.
	Receiver string    `json:"receiver"`
	Reason   string    `json:"reason"`
	Status   int       `json:"status"`
	Count    int64     `json:"count"`
	FirstAt  time.Time `json:"first_at"`
	LastAt   time.Time `json:"last_at"`
	// EventID and EventType are those of a refused delivery whose
	// signature verified (the store failed to record it), else empty.
	EventID   string `json:"event_id,omitempty"`
	EventType string `json:"event_type,omitempty"`
}

// RefusedList is the rows of the record a filter selects, newest minute
// first.
type RefusedList struct {
	Refused []Refused `json:"refused"`
	// MoreMatched says that more rows matched than the filter's Limit.
	MoreMatched bool `json:"more_matched"`
}

// ListRefused lists the rows of the record of refused deliveries that f
// selects, at most f.Limit (store.DefaultRefusedPage), and says whether
// more matched.
func ListRefused(ctx context.Context, st RefusedStore, f store.RefusedFilter) (RefusedList, error) {
	if f.Limit <= 0 {
		f.Limit = store.DefaultRefusedPage
	}
	limit := f.Limit
	f.Limit++
	rows, err := st.RefusedDeliveries(ctx, f)
	if err != nil {
		return RefusedList{}, err
	}
	l := RefusedList{Refused: make([]Refused, 0, min(len(rows), limit))}
	if len(rows) > limit {
		rows, l.MoreMatched = rows[:limit], true
	}
	for _, r := range rows {
		l.Refused = append(l.Refused, Refused{
			Minute: r.Minute, Receiver: store.ReceiverName(r.Receiver), Reason: r.Reason, Status: r.Status, Count: r.Count,
			FirstAt: r.FirstAt, LastAt: r.LastAt, EventID: r.EventID, EventType: r.EventType,
		})
	}
	return l, nil
}
