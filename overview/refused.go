package overview

import (
	"context"
	"fmt"
	"time"

	"github.com/siteops/siteops/store"
)

// refusedWithin is how far back the overview sums refused deliveries.
const refusedWithin = time.Hour

// Refused is what the ingress refused of one receiver for one reason in
// the last hour, before recording anything: a sender with a wrong secret,
// an endpoint pointed at a receiver this deployment does not have, a
// prober.
type Refused struct {
	Receiver string    `json:"receiver"`
	Reason   string    `json:"reason"`
	Status   int       `json:"status"`
	Count    int64     `json:"count"`
	FirstAt  time.Time `json:"first_at"`
	LastAt   time.Time `json:"last_at"`
	Next     string    `json:"next"`
}

func refused(ctx context.Context, o Options) ([]Refused, error) {
	sum, err := o.Store.RefusalSummary(ctx, o.Now().Add(-refusedWithin))
	if err != nil {
		return nil, err
	}
	out := []Refused{}
	for _, r := range sum {
		name := store.ReceiverName(r.Receiver)
		out = append(out, Refused{Receiver: name, Reason: r.Reason, Status: r.Status, Count: r.Count, FirstAt: r.FirstAt, LastAt: r.LastAt,
			Next: fmt.Sprintf("siteops events list --refused --receiver %s --since 1h (docs/observability.md#siteopswebhookdeliveriesrefused)", name)})
		if len(out) == o.Limit {
			break
		}
	}
	return out, nil
}
