package overview

import (
	"context"
	"fmt"
	"time"

	"github.com/siteops/siteops/store"
)

// storeSeen is a lead sync's last page as the store records it.
type storeSeen = store.LeadSyncSeen

// Inbox is the webhook inbox's backlog: events the relay has not handled
// and the dead letters it stopped retrying.
type Inbox struct {
	Pending       int       `json:"pending"`
	OldestPending time.Time `json:"oldest_pending,omitzero"`
	// Behind says the oldest pending event waits longer than the relay
	// takes when it keeps up (behindAfter).
	Behind bool   `json:"behind"`
	Dead   int    `json:"dead_letters"`
	Next   string `json:"next,omitempty"`
}

// behindAfter is how long an event may wait for the relay before the
// inbox counts as behind: the relay claims every second, and coalesces
// lead.created for a second.
const behindAfter = time.Minute

func inbox(ctx context.Context, o Options) (Inbox, error) {
	b, err := o.Store.InboxBacklog(ctx)
	if err != nil {
		return Inbox{}, fmt.Errorf("reading the inbox: %w", err)
	}
	in := Inbox{Pending: b.Undispatched, OldestPending: b.OldestPending.UTC(), Dead: b.Dead}
	if b.OldestPending.IsZero() {
		in.OldestPending = time.Time{}
	}
	in.Behind = !in.OldestPending.IsZero() && o.Now().Sub(in.OldestPending) > behindAfter
	switch {
	case in.Dead > 0:
		in.Next = "siteops events list --outcome dead (why they failed), then after fixing the cause: siteops events replay --outcome dead"
	case in.Behind:
		in.Next = "the relay is behind: siteops events list --pending, and check that an ingress runs and reaches Temporal (siteops doctor)"
	}
	return in, nil
}
