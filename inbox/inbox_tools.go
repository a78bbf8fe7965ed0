package inbox

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/siteops/siteops/relay"
	"github.com/siteops/siteops/store"
)

// EventStore is the part of the store the inbox tools read and change.
type EventStore interface {
	ListEvents(ctx context.Context, f store.EventFilter) (store.EventPage, error)
	OldestEvent(ctx context.Context) (time.Time, error)
	Event(ctx context.Context, eventID string) (store.EventDetail, error)
	MatchingEventIDs(ctx context.Context, f store.EventFilter, limit int) ([]string, bool, error)
	PreviewReplay(ctx context.Context, ids []string) ([]store.Replayed, error)
	ReplayEvents(ctx context.Context, ids []string, operator string) ([]store.Replayed, error)
}

var _ EventStore = (*store.Store)(nil)

// EventStates are the states an event is listed or replayed by: the
// relay's outcomes, and failing or pending while it has not handled the
// event.
func EventStates() []string {
	return append(store.Outcomes(), store.StatusFailing, store.StatusPending)
}

// Event is an inbox event as the inbox tools show it, without its body.
type Event struct {
	EventID string `json:"event_id"`
	// Type is the event's type, or for a record siteops made, its kind.
	Type           string     `json:"type"`
	Kind           string     `json:"kind"`
	SiteID         string     `json:"site_id,omitempty"`
	ReceivedAt     time.Time  `json:"received_at"`
	Status         string     `json:"status"`
	Outcome        string     `json:"outcome,omitempty"`
	DispatchedAt   *time.Time `json:"dispatched_at,omitempty"`
	Attempts       int        `json:"attempts"`
	Failures       int        `json:"failures"`
	LastError      string     `json:"last_error,omitempty"`
	NextAttemptAt  *time.Time `json:"next_attempt_at,omitempty"`
	Replays        int        `json:"replays"`
	ReplayedAt     *time.Time `json:"replayed_at,omitempty"`
	ReplayedBy     string     `json:"replayed_by,omitempty"`
	Receiver       string     `json:"receiver"`
	EndpointID     string     `json:"endpoint_id"`
	SubjectEventID string     `json:"subject_event_id,omitempty"`
}

// NewEvent is r as the inbox tools show it.
func NewEvent(r store.EventRecord) Event {
	e := Event{
		EventID: r.EventID, Type: EventType(r), Kind: r.Kind, SiteID: r.SiteID, ReceivedAt: r.ReceivedAt,
		Status: r.Status(), Outcome: r.Outcome, DispatchedAt: optTime(r.DispatchedAt), Attempts: r.Attempts, Failures: r.Failures,
		LastError: r.LastError, Replays: r.Replays, ReplayedAt: optTime(r.ReplayedAt), ReplayedBy: r.ReplayedBy,
		Receiver: store.ReceiverName(r.Receiver), EndpointID: r.EndpointID, SubjectEventID: r.SubjectEventID,
	}
	if r.Outcome == "" {
		e.NextAttemptAt = optTime(r.NextAttemptAt)
	}
	return e
}

// EventType names an event's type, or for a record siteops made, its
// kind, as the relay's metrics label it.
func EventType(r store.EventRecord) string {
	return relay.TypeLabel(store.InboxEvent{Kind: r.Kind, EventType: r.EventType})
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// EventList is one page of the inbox, newest first, and when the oldest
// event it keeps was received (nil when it is empty).
type EventList struct {
	Events []Event `json:"events"`
	// NextPage continues the listing; nil on the last page.
	NextPage         *string    `json:"next_page"`
	OldestReceivedAt *time.Time `json:"oldest_received_at"`
}

// ListEvents lists the page of events f selects. A page token that
// ListEvents did not make is store.ErrBadPage.
func ListEvents(ctx context.Context, st EventStore, f store.EventFilter) (EventList, error) {
	page, err := st.ListEvents(ctx, f)
	if err != nil {
		return EventList{}, err
	}
	oldest, err := st.OldestEvent(ctx)
	if err != nil {
		return EventList{}, err
	}
	l := EventList{Events: make([]Event, 0, len(page.Events)), OldestReceivedAt: optTime(oldest)}
	for _, r := range page.Events {
		l.Events = append(l.Events, NewEvent(r))
	}
	if page.Next != "" {
		l.NextPage = &page.Next
	}
	return l, nil
}

// Where the secret that verified an event lives, as Verification.Secret
// says it.
const (
	SecretStored    = "stored"     // stored here, with its fingerprint
	SecretEnv       = "env"        // SITEOPS_WEBHOOK_SECRETS
	SecretNotStored = "not-stored" // an endpoint's, no longer stored here
)

// Verification says how an event was verified, never with which secret.
type Verification struct {
	Receiver   string `json:"receiver"`
	EndpointID string `json:"endpoint_id"`
	// Secret is where the verifying secret lives: SecretStored (with its
	// fingerprint), SecretEnv or SecretNotStored.
	Secret      string `json:"secret"`
	Fingerprint string `json:"fingerprint,omitempty"`
}

// VerificationOf says how d was verified.
func VerificationOf(d store.EventDetail) Verification {
	v := Verification{Receiver: store.ReceiverName(d.Receiver), EndpointID: d.EndpointID, Fingerprint: d.Fingerprint}
	switch {
	case d.Fingerprint != "":
		v.Secret = SecretStored
	case d.EndpointID == store.EnvEndpoint:
		v.Secret = SecretEnv
	default:
		v.Secret = SecretNotStored
	}
	return v
}

// EventDetail is everything the inbox tools show of one event.
type EventDetail struct {
	Event
	Verification Verification `json:"verification"`
	TraceContext string       `json:"trace_context,omitempty"`
	// Workflow is the workflow the latest attempt reached or tried.
	Workflow *WorkflowRun `json:"workflow"`
	History  []Attempt    `json:"history"`
	// Body is the envelope byte for byte as received (a JSON string, so
	// that no re-indenting changes it); BodyBase64 holds it instead when it
	// is not UTF-8.
	Body       string `json:"body,omitempty"`
	BodyBase64 []byte `json:"body_base64,omitempty"`
}

// WorkflowRun names a workflow, and its run when known.
type WorkflowRun struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id,omitempty"`
}

// Attempt is one entry of an event's history: a dispatch attempt or a
// replay.
type Attempt struct {
	At         time.Time `json:"at"`
	Kind       string    `json:"kind"`
	Attempt    int       `json:"attempt"`
	Replay     int       `json:"replay"`
	Outcome    string    `json:"outcome,omitempty"`
	WorkflowID string    `json:"workflow_id,omitempty"`
	RunID      string    `json:"run_id,omitempty"`
	Error      string    `json:"error,omitempty"`
	Operator   string    `json:"operator,omitempty"`
}

// NewEventDetail is d as the inbox tools show it.
func NewEventDetail(d store.EventDetail) EventDetail {
	out := EventDetail{Event: NewEvent(d.EventRecord), Verification: VerificationOf(d), TraceContext: d.TraceContext, History: []Attempt{}}
	if wf, run := d.Target(); wf != "" {
		out.Workflow = &WorkflowRun{WorkflowID: wf, RunID: run}
	}
	for _, h := range d.History {
		out.History = append(out.History, Attempt(h))
	}
	if utf8.Valid(d.Body) {
		out.Body = string(d.Body)
	} else {
		out.BodyBase64 = d.Body
	}
	return out
}

// ErrorLine is a recorded error on one line of at most n characters,
// for a column or a sentence beside other words.
func ErrorLine(s string, n int) string {
	lines := strings.FieldsFunc(strings.ReplaceAll(strings.TrimSpace(s), "\r", ""), func(r rune) bool { return r == '\n' })
	s = strings.Join(lines, "; ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
