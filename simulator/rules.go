package simulator

import "fmt"

// The simulator's own rule tables, written from the contract rather than
// taken from package agentsite, so that a rule wrong on one side is caught
// by crosscheck_test.go instead of being wrong on both. The rules for
// allowed_origins are in origins.go, those for webhook URLs in receivers.go
// and the non-public address table in addresses.go.

// knowledgeText is the contract's limit on a knowledge source's text: "5 to
// 200,000 characters". A character is a Unicode code point, so "日本語日本"
// is 5 characters; combining marks count on their own.
var knowledgeText = struct{ min, max int }{min: 5, max: 200_000}

// checkKnowledgeText answers why text breaks the length limit, or "".
// Decoded JSON is always valid UTF-8 (decodeStrict refuses a body that is
// not), so every character counted is a code point of the text sent.
func checkKnowledgeText(text string) string {
	n := 0
	for range text {
		n++
	}
	if n < knowledgeText.min || n > knowledgeText.max {
		return fmt.Sprintf("text is %d characters (code points); it must be %d to %d", n, knowledgeText.min, knowledgeText.max)
	}
	return ""
}

// eventCatalogue is the contract's table of event types: when each is
// emitted, and whether it is retired. An endpoint may subscribe to every
// type that is not retired.
var eventCatalogue = map[string]struct {
	emittedWhen string
	retired     bool
}{
	"site.published":               {emittedWhen: "a site becomes published"},
	"site.unpublished":             {emittedWhen: "a site is returned to draft state"},
	"lead.created":                 {emittedWhen: "the agent captures a new lead"},
	"conversation.started":         {emittedWhen: "a new conversation thread begins"},
	"conversation.message.created": {emittedWhen: "a message is added to a conversation"},
	"knowledge.ready":              {emittedWhen: "a knowledge source completes processing"},
	"broadcast.sent":               {emittedWhen: "a broadcast finishes its send workflow"},
	"domain.activated":             {retired: true},
}

// checkEventTypes answers why a subscription is refused, or "". Where the
// contract is silent the simulator is strict: a subscription names at
// least one type and no type twice. Types are case-sensitive.
func checkEventTypes(events []string) string {
	if len(events) == 0 {
		return "subscribe to at least one event type, e.g. lead.created"
	}
	seen := make(map[string]bool, len(events))
	for i, e := range events {
		entry, known := eventCatalogue[e]
		switch {
		case !known:
			return fmt.Sprintf("events[%d] %q is not an event type of the service", i, e)
		case entry.retired:
			return fmt.Sprintf("events[%d] %q is retired: custom domains are not offered and this event is never emitted", i, e)
		case seen[e]:
			return fmt.Sprintf("events[%d] %q is listed twice", i, e)
		}
		seen[e] = true
	}
	return ""
}
