package relay

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/siteops/siteops/store"
)

// failed turns the dispatches ds of job j, which failed with err, into
// retries after a backoff doubling from 1 s to MaxBackoff, or, for an
// event that failed MaxAttempts times in a row, a dead letter; and logs
// it. outOfTime says that the dispatch ran out of its DispatchTimeout.
func (r *Relay) failed(j *job, ds []store.Dispatch, err error, outOfTime bool) {
	first := j.evs[0]
	why := failureCause(err, outOfTime, r.opts.DispatchTimeout)
	dead := 0
	for i, ev := range j.evs {
		ds[i].Outcome, ds[i].Error = "", why
		if ev.Failures+1 >= r.opts.MaxAttempts {
			ds[i].Dead = true
			dead++
			continue
		}
		delay := min(time.Duration(1<<min(ev.Failures, 20))*time.Second, r.opts.MaxBackoff)
		ds[i].Next = r.opts.Now().Add(delay)
	}
	if dead > 0 {
		r.opts.Logger.Error("relay: dispatch failed too often; dead letters kept for `siteops events replay`", "event_id", first.EventID, "event_type", TypeLabel(first),
			"events", len(j.evs), "dead", dead, "attempts_in_a_row", r.opts.MaxAttempts, "error", err)
	} else {
		r.opts.Logger.Warn("relay: dispatch failed; will retry", "event_id", first.EventID, "event_type", TypeLabel(first), "events", len(j.evs), "attempt", first.Attempts+1, "error", err)
	}
}

// failureCause is the last error an event keeps (siteops events show): it
// names the cause, Temporal that did not answer within the dispatch's
// time, or that answered Unavailable (down, restarting, unreachable).
func failureCause(err error, outOfTime bool, timeout time.Duration) string {
	why := err.Error()
	var (
		noAnswer    *serviceerror.DeadlineExceeded
		unavailable *serviceerror.Unavailable
	)
	switch {
	case errors.As(err, &noAnswer) && outOfTime:
		why = fmt.Sprintf("%s: Temporal did not answer within %s (the relay's dispatch timeout): it is down, unreachable or overloaded (a history service that is down looks like this); the relay tries again", why, timeout)
	case errors.As(err, &noAnswer):
		why += ": Temporal gave no answer in time (it is overloaded or its history service is down); the relay tries again"
	case errors.As(err, &unavailable):
		why += ": Temporal is unavailable (down, restarting or unreachable); the relay tries again"
	}
	return why
}
