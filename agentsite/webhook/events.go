package webhook

// EventType names the kind of an event, as sent in the svc-event-type header
// and in the envelope's type field.
type EventType string

// The event types of the contract.
const (
	SitePublished              EventType = "site.published"
	SiteUnpublished            EventType = "site.unpublished"
	LeadCreated                EventType = "lead.created"
	ConversationStarted        EventType = "conversation.started"
	ConversationMessageCreated EventType = "conversation.message.created"
	KnowledgeReady             EventType = "knowledge.ready"
	BroadcastSent              EventType = "broadcast.sent"

	// DomainActivated is retired: custom domains are not offered and the
	// service never emits it. It is kept so that receivers can name it when
	// they record and ignore it, and so that subscriptions to it are refused
	// with a clear reason.
	DomainActivated EventType = "domain.activated"
)

// EventSpec is one row of the contract's table of event types.
type EventSpec struct {
	Type EventType
	// EmittedWhen is the contract's "Emitted when", word for word.
	EmittedWhen string
	// Retired types are never emitted, and a subscription to one is
	// refused; receivers still name them when they record and ignore one.
	Retired bool
}

// Catalogue is the contract's table of event types, in its order, retired
// ones included: the one list every other list of event types in siteops
// derives from (EventTypes, Known, Retired; the route table of
// the relay (package relay) has exactly one row for each, and tests hold the
// simulator's own table, written from the contract apart, to it).
var Catalogue = []EventSpec{
	{Type: SitePublished, EmittedWhen: "a site becomes published"},
	{Type: SiteUnpublished, EmittedWhen: "a site is returned to draft state"},
	{Type: LeadCreated, EmittedWhen: "the agent captures a new lead"},
	{Type: ConversationStarted, EmittedWhen: "a new conversation thread begins"},
	{Type: ConversationMessageCreated, EmittedWhen: "a message is added to a conversation"},
	{Type: KnowledgeReady, EmittedWhen: "a knowledge source completes processing"},
	{Type: BroadcastSent, EmittedWhen: "a broadcast finishes its send workflow"},
	{Type: DomainActivated, EmittedWhen: "retired: custom domains are not offered and this event is never emitted", Retired: true},
}

// EventTypes lists every event type that may be subscribed to, in the order
// of the contract: the Catalogue less the retired.
func EventTypes() []EventType {
	var out []EventType
	for _, e := range Catalogue {
		if !e.Retired {
			out = append(out, e.Type)
		}
	}
	return out
}

// Spec is the Catalogue's row of t; false for a type the contract does
// not name.
func (t EventType) Spec() (EventSpec, bool) {
	for _, e := range Catalogue {
		if e.Type == t {
			return e, true
		}
	}
	return EventSpec{}, false
}

// Known reports whether t is an event type the service emits today.
func (t EventType) Known() bool {
	e, ok := t.Spec()
	return ok && !e.Retired
}

// Retired reports whether t was once emitted and never is any more.
func (t EventType) Retired() bool {
	e, ok := t.Spec()
	return ok && e.Retired
}

// ReceiverName names one of siteops' receivers of deliveries (the ingress's
// POST /webhooks/{receiver}) for people, logs and metric labels: ""
// (POST /webhooks) is "default", the name `siteops signature verify
// --receiver` takes for it. The CLI, the doctor, the ingress, the
// activities and the workflows' summaries all name receivers with it.
func ReceiverName(receiver string) string {
	if receiver == "" {
		return "default"
	}
	return receiver
}
