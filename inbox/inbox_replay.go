package inbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/siteops/siteops/relay"
	"github.com/siteops/siteops/store"
)

// ReplayRequest says which inbox events to queue for the relay again.
type ReplayRequest struct {
	// IDs are the events to replay; all of them must be in the inbox.
	// Without them, the newest Limit events Filter selects are.
	IDs    []string
	Filter store.EventFilter
	Limit  int
	// DryRun says what would be replayed and changes nothing.
	DryRun bool
	// Operator is who asks; the replay is recorded with it.
	Operator string
}

// ReplayResult is what a replay did, or with DryRun would do.
type ReplayResult struct {
	DryRun bool `json:"dry_run"`
	// MoreMatched says that Filter selected more events than Limit: only
	// the newest were taken.
	MoreMatched bool     `json:"more_matched"`
	Operator    string   `json:"operator"`
	Replayed    []Replay `json:"replayed"`
}

// Replay is one replayed event: what it was before, and what a replay of
// it can change.
type Replay struct {
	EventID            string `json:"event_id"`
	Type               string `json:"type"`
	SiteID             string `json:"site_id,omitempty"`
	PreviousStatus     string `json:"previous_status"`
	PreviousWorkflowID string `json:"previous_workflow_id,omitempty"`
	Replay             int    `json:"replay"`
	Note               string `json:"note"`
	// After AwaitReplays: what the relay made of it.
	Status     string `json:"status,omitempty"`
	WorkflowID string `json:"workflow_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	Error      string `json:"error,omitempty"`
}

// ReplayEvents queues events for the relay again: each is made due at
// once, its failures are forgotten (a dead letter gets relay.DefaultMaxAttempts
// attempts again), and the replay is recorded with who asked and when. An
// id the inbox does not hold is store.ErrNotFound, and nothing is
// replayed.
func ReplayEvents(ctx context.Context, st EventStore, req ReplayRequest) (ReplayResult, error) {
	res := ReplayResult{DryRun: req.DryRun, Operator: req.Operator}
	ids := req.IDs
	if len(ids) == 0 {
		var err error
		if ids, res.MoreMatched, err = st.MatchingEventIDs(ctx, req.Filter, req.Limit); err != nil {
			return res, err
		}
	}
	var (
		replayed []store.Replayed
		err      error
	)
	if req.DryRun {
		replayed, err = st.PreviewReplay(ctx, ids)
	} else {
		replayed, err = st.ReplayEvents(ctx, ids, req.Operator)
	}
	if err != nil {
		return res, err
	}
	res.Replayed = make([]Replay, len(replayed))
	for i, r := range replayed {
		res.Replayed[i] = Replay{EventID: r.EventID, Type: EventType(r.EventRecord), SiteID: r.SiteID, PreviousStatus: r.Status(),
			PreviousWorkflowID: r.WorkflowID, Replay: r.Replay, Note: replayNote(r)}
	}
	return res, nil
}

// replayNote says, before the relay dispatches it again, what a replay of
// r can change.
func replayNote(r store.Replayed) string {
	switch r.Outcome {
	case store.OutcomeSignalled:
		return "had reached " + r.WorkflowID + ", which deduplicates by event id: " + rememberedBy(r) +
			"; while it still remembers this event the replay changes nothing there"
	case store.OutcomeNoTarget:
		return "had no workflow to go to; it reaches the one recorded for its site since, if any"
	case store.OutcomeTargetGone:
		return r.WorkflowID + " had ended; the replay reaches it only if it runs again now"
	case store.OutcomeDead:
		return fmt.Sprintf("a dead letter after %d failed attempts in a row (%s); it gets %d attempts again",
			r.Failures, ErrorLine(r.LastError, 80), relay.DefaultMaxAttempts)
	case store.OutcomeMalformed:
		return "its data lacks the ids its route needs; the body is replayed as recorded, so it will be malformed again"
	case store.OutcomeIgnored:
		return "no workflow waits for " + EventType(r.EventRecord) + " events; it will be ignored again"
	}
	if r.Failures > 0 {
		return fmt.Sprintf("was failing (%d attempts: %s); due again now, its backoff reset", r.Failures, ErrorLine(r.LastError, 80))
	}
	return "was still waiting for the relay; due now"
}

// rememberedBy says how long the workflow an event reached keeps its id:
// its route's Memory.
func rememberedBy(r store.Replayed) string {
	rt, ok := relay.RouteOf(store.InboxEvent{Kind: r.Kind, EventType: r.EventType})
	if ok && strings.HasPrefix(r.WorkflowID, relay.LeadEventsRoute.Target.Prefix) {
		rt = relay.LeadEventsRoute // the event went to its site's shard
	}
	if !ok || !rt.Routed() {
		return "it deduplicates by its own rules"
	}
	m := rt.Memory()
	if rt.Start != nil {
		m += " (a run started after it ended remembers none)"
	}
	return m
}

// ReplaysPendingError is a wait for replayed events that ended before the
// relay had handled them all; they stay queued. Err is why the wait ended
// (the context's error), and Timeout the wait's bound (0: none).
type ReplaysPendingError struct {
	Left, Total int
	Err         error
	Timeout     time.Duration
}

// Error says what goes on without the wait, and where to follow it: an
// interrupted wait is worded as the CLI's other interrupted waits are.
func (e *ReplaysPendingError) Error() string {
	switch {
	case errors.Is(e.Err, context.Canceled):
		return fmt.Sprintf("stopped waiting; %d of %d replayed event(s) stay queued and the relay of a running siteops ingress dispatches them — siteops events list --pending", e.Left, e.Total)
	case errors.Is(e.Err, context.DeadlineExceeded) && e.Timeout > 0:
		return fmt.Sprintf("%d of %d replayed event(s) not dispatched after %s (--timeout): is siteops ingress running against this store? They stay queued", e.Left, e.Total, e.Timeout)
	}
	return fmt.Sprintf("%d of %d replayed event(s) not dispatched yet (%v); they stay queued", e.Left, e.Total, e.Err)
}

func (e *ReplaysPendingError) Unwrap() error { return e.Err }

// AwaitReplays reads the inbox every interval until the relay has handled
// each replayed event, or tried it after the replay and failed, and fills
// in what became of it. When ctx ends first, or timeout (0: no limit), it
// returns a *ReplaysPendingError.
func AwaitReplays(ctx context.Context, st EventStore, replays []Replay, interval, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		left := 0
		for i := range replays {
			r := &replays[i]
			if r.Status != "" {
				continue
			}
			d, err := st.Event(ctx, r.EventID)
			if err != nil && ctx.Err() == nil {
				return err
			}
			if err == nil && (d.Outcome != "" || d.Failures > 0) {
				r.Status, r.Error = d.Status(), d.LastError
				r.WorkflowID, r.RunID = d.Target()
				continue
			}
			left++
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return &ReplaysPendingError{Left: left, Total: len(replays), Err: ctx.Err(), Timeout: timeout}
		case <-t.C:
		}
	}
}
