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

// EventTypes lists every event type that may be subscribed to, in the order
// of the contract. It leaves out the retired DomainActivated.
func EventTypes() []EventType {
	return []EventType{
		SitePublished, SiteUnpublished, LeadCreated, ConversationStarted,
		ConversationMessageCreated, KnowledgeReady, BroadcastSent,
	}
}

// Known reports whether t is an event type the service emits today.
func (t EventType) Known() bool {
	switch t {
	case SitePublished, SiteUnpublished, LeadCreated, ConversationStarted,
		ConversationMessageCreated, KnowledgeReady, BroadcastSent:
		return true
	}
	return false
}

// Retired reports whether t was once emitted and never is any more.
func (t EventType) Retired() bool { return t == DomainActivated }
