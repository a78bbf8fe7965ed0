package store

// The outcome vocabulary of the inbox: what became of an event, as the
// relay records it (RecordDispatches), the history keeps it, the inbox
// tools list and filter it (EventFilter.Status) and replays start from it.
// It lives here, the lowest package that reads it, so that the ingress,
// the relay and the CLI name one set.

// Outcomes of a handled event: the relay's, and the handler's malformed.
const (
	OutcomeSignalled  = "signalled"   // the target workflow got the event
	OutcomeNoTarget   = "no-target"   // no workflow is known for the event's site or endpoint
	OutcomeTargetGone = "target-gone" // the target workflow has ended
	OutcomeIgnored    = "ignored"     // a type no workflow waits for
	OutcomeMalformed  = "malformed"   // a body that is no envelope, or data without the ids its route needs
	// OutcomeDead is the outcome of a dead letter: an event whose dispatch
	// failed as many times in a row as the relay allows. The relay no
	// longer claims it, the purge keeps it, and a replay queues it again.
	OutcomeDead = "dead"
)

// OutcomeFailed is the outcome a failed attempt has in the history (the
// event itself stays pending, or becomes a dead letter).
const OutcomeFailed = "failed"

// Statuses of an inbox event that the relay has not handled: pending (not
// tried yet, or due again) and failing (its last attempt failed and it is
// tried again later). A handled event's status is its outcome.
const (
	StatusPending = "pending"
	StatusFailing = "failing"
)

// Outcomes lists the outcomes of a handled event, in the order the inbox
// tools offer them.
func Outcomes() []string {
	return []string{OutcomeSignalled, OutcomeNoTarget, OutcomeTargetGone, OutcomeIgnored, OutcomeMalformed, OutcomeDead}
}
