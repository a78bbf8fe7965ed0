package relay

import (
	"fmt"
	"slices"
	"strings"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// Route is one row of the route table: where the events of one type go.
// The handler reads its lane, the relay its target and signal, and the
// inbox tools what its target remembers. Adding an event type a workflow
// waits for is one row of Routes, plus the signal in package workflows.
type Route struct {
	// Type is the event type; for the record siteops makes of an
	// endpoint's first verified delivery, its kind.
	Type string
	// Lane is the inbox lane the handler records the events in: priority
	// for events a workflow waits on, so that a flood of lead.created
	// never delays them.
	Lane store.Lane
	// Target is the kind of workflow the events go to; the zero Kind for a
	// type no workflow waits for (the relay records those ignored).
	Target workflows.Kind
	// Via is how the target's workflow ID derives from the event.
	Via Via
	// Signal is the signal the target gets; Arg its argument for the
	// events one signal carries, with the data read of the first.
	Signal string
	Arg    func(evs []store.InboxEvent, d EventData) any
	// Start, when set, makes the signal a SignalWithStart: a target that
	// is not running is started with Start(key) as its input. Without it
	// the relay only signals, and a target that ended is target-gone.
	Start func(key string) any
	// Batch sends the events of one site claimed together in one signal,
	// and holds back those claimed within LeadCoalesce of the site's last
	// signal for the next one (Via must be ViaSite).
	Batch bool
	// Remembers is how many event ids the target remembers to deduplicate
	// a redelivered or replayed event: the latest n, RemembersAll for
	// every id it saw while it runs, or RemembersFirst when it acts on the
	// first event only.
	Remembers int
}

// Via is how a route's target workflow ID derives from an event.
type Via int

// The ways to a target.
const (
	// ViaSite derives the ID from the event's data.site_id
	// (Target.ID(site_id)).
	ViaSite Via = iota + 1
	// ViaSiteWorkflow is the workflow the store records as the owner of
	// the event's data.site_id (store.SiteWorkflow): its onboarding.
	ViaSiteWorkflow
	// ViaShard is the shard of the events' sites (Target.ID(shard key)),
	// which the relay groups them by.
	ViaShard
	// ViaEndpoint is the rotation the store records for the endpoint whose
	// secret verified the event (store.RotationFor).
	ViaEndpoint
)

// What a route's target remembers, besides a count of the latest ids.
const (
	RemembersAll   = -1
	RemembersFirst = -2
)

// Routes is the route table of the contract's event types, in the
// contract's order, retired ones included: exactly one row each. A type
// without a row (one added to the contract later) is recorded in the bulk
// lane and ignored.
var Routes = []Route{
	{Type: string(webhook.SitePublished), Lane: store.LanePriority, Target: workflows.OnboardingKind, Via: ViaSiteWorkflow,
		Signal: workflows.SignalSiteStatus, Arg: siteStatus, Remembers: RemembersAll},
	{Type: string(webhook.SiteUnpublished), Lane: store.LanePriority, Target: workflows.OnboardingKind, Via: ViaSiteWorkflow,
		Signal: workflows.SignalSiteStatus, Arg: siteStatus, Remembers: RemembersAll},
	{Type: string(webhook.LeadCreated), Lane: store.LaneBulk, Target: workflows.LeadSyncKind, Via: ViaSite,
		Signal: workflows.SignalLeadsCreated, Arg: leadsCreated, Start: leadSyncInput, Batch: true,
		Remembers: workflows.RecentEventsKept},
	{Type: string(webhook.ConversationStarted), Lane: store.LaneBulk},
	{Type: string(webhook.ConversationMessageCreated), Lane: store.LaneBulk},
	{Type: string(webhook.KnowledgeReady), Lane: store.LanePriority, Target: workflows.OnboardingKind, Via: ViaSiteWorkflow,
		Signal: workflows.SignalKnowledgeReady, Arg: knowledgeReady, Remembers: RemembersAll},
	{Type: string(webhook.BroadcastSent), Lane: store.LaneBulk},
	{Type: string(webhook.DomainActivated), Lane: store.LaneBulk},
}

// LeadEventsRoute is the route of lead.created when the relay runs with
// lead shards (Options.LeadShards): the events claimed together go, one
// signal per shard, to the LeadEvents workflow of their sites' shard
// (workflows.LeadShardKey), which syncs many sites with one activity.
var LeadEventsRoute = Route{
	Type: string(webhook.LeadCreated), Lane: store.LaneBulk, Target: workflows.LeadEventsKind, Via: ViaShard,
	Signal: workflows.SignalSiteLeads, Arg: siteLeads, Start: leadEventsInput, Batch: true,
	Remembers: workflows.ShardEventsKept,
}

// VerifiedRoute routes the record siteops makes of an endpoint's first
// verified delivery (store.KindEndpointVerified) to the rotation waiting
// for it. Its Lane is not read: the record goes to the lane of the
// delivery that verified the endpoint.
var VerifiedRoute = Route{
	Type: store.KindEndpointVerified, Lane: store.LanePriority, Target: workflows.SecretRotationKind, Via: ViaEndpoint,
	Signal: workflows.SignalVerifiedDelivery, Arg: verifiedDelivery, Remembers: RemembersFirst,
}

// The signals' arguments.
func leadsCreated(evs []store.InboxEvent, _ EventData) any {
	sig := workflows.LeadsCreatedSignal{EventIDs: make([]string, len(evs))}
	for i, ev := range evs {
		sig.EventIDs[i] = ev.EventID
	}
	return sig
}

func leadSyncInput(siteID string) any { return workflows.LeadSyncInput{SiteID: siteID} }

// siteLeads groups evs, lead.created of a shard's sites, by site, in the
// order the sites first come.
func siteLeads(evs []store.InboxEvent, _ EventData) any {
	var sig workflows.SiteLeadsSignal
	at := map[string]int{}
	for _, ev := range evs {
		d, _ := readData(ev)
		i, ok := at[d.SiteID]
		if !ok {
			i = len(sig.Sites)
			at[d.SiteID] = i
			sig.Sites = append(sig.Sites, workflows.SiteEvents{SiteID: d.SiteID})
		}
		sig.Sites[i].EventIDs = append(sig.Sites[i].EventIDs, ev.EventID)
	}
	return sig
}

func leadEventsInput(shard string) any { return workflows.LeadEventsInput{Shard: shard} }

func knowledgeReady(evs []store.InboxEvent, d EventData) any {
	return workflows.KnowledgeReadySignal{EventID: evs[0].EventID, KnowledgeID: d.KnowledgeID}
}

func siteStatus(evs []store.InboxEvent, d EventData) any {
	return workflows.SiteStatusSignal{EventID: evs[0].EventID, Type: evs[0].EventType, Status: d.Status}
}

func verifiedDelivery(evs []store.InboxEvent, _ EventData) any {
	return workflows.VerifiedDeliverySignal{EventID: evs[0].SubjectEventID, EndpointID: evs[0].EndpointID}
}

// RouteFor is the row of an event type; false when the table has none.
func RouteFor(eventType string) (Route, bool) {
	for _, rt := range Routes {
		if rt.Type == eventType {
			return rt, true
		}
	}
	return Route{}, false
}

// RouteOf is the route of an inbox record: its type's row, VerifiedRoute
// for the record of a verified endpoint; false for a type without a row
// and a kind the relay does not know.
func RouteOf(ev store.InboxEvent) (Route, bool) {
	switch ev.Kind {
	case store.KindEndpointVerified:
		return VerifiedRoute, true
	case store.KindWebhook, "":
		return RouteFor(ev.EventType)
	}
	return Route{}, false
}

// LaneFor is the inbox lane of an event type (its row's Lane); the bulk
// lane for a type without a row.
func LaneFor(eventType string) store.Lane {
	if rt, ok := RouteFor(eventType); ok {
		return rt.Lane
	}
	return store.LaneBulk
}

// Routed says whether a workflow waits for the route's events.
func (rt Route) Routed() bool { return rt.Signal != "" }

// Memory says how the route's target deduplicates its events by id, as a
// clause for people ("a lead sync remembers the last 1,000 lead.created
// ids it counted"); empty for a route without a target.
func (rt Route) Memory() string {
	if !rt.Routed() {
		return ""
	}
	who := article(kindNoun(rt.Target))
	switch rt.Remembers {
	case RemembersAll:
		return who + " remembers every event id it saw while it runs"
	case RemembersFirst:
		return who + " acts on its first " + eventNoun(rt.Type) + " only"
	}
	memory := fmt.Sprintf("%s remembers the last %s %s ids it counted", who, thousands(rt.Remembers), rt.Type)
	if rt.Via == ViaShard {
		memory += ", over all its sites"
	}
	return memory
}

// Memories is what each target of the route table remembers (Memory),
// once per target kind, in the table's order: the rows of Routes, then
// LeadEventsRoute and VerifiedRoute.
func Memories() []string {
	var out []string
	seen := map[string]bool{}
	for _, rt := range append(Routes[:len(Routes):len(Routes)], LeadEventsRoute, VerifiedRoute) {
		if !rt.Routed() || seen[rt.Target.Name] {
			continue
		}
		seen[rt.Target.Name] = true
		out = append(out, rt.Memory())
	}
	return out
}

// kindNoun names a workflow kind for people by its ID prefix
// ("lead-sync/" is a lead sync).
func kindNoun(k workflows.Kind) string {
	if k.Name == workflows.LeadEventsKind.Name {
		return "lead event shard (SITEOPS_LEAD_SHARDS)"
	}
	return strings.ReplaceAll(strings.TrimSuffix(k.Prefix, "/"), "-", " ")
}

// eventNoun names an event type or record kind for people
// ("endpoint-verified" is a verified delivery).
func eventNoun(typ string) string {
	if typ == store.KindEndpointVerified {
		return "verified delivery"
	}
	return typ + " event"
}

func article(noun string) string {
	if strings.ContainsRune("aeiou", rune(noun[0])) {
		return "an " + noun
	}
	return "a " + noun
}

// thousands writes n with commas between groups of three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TypeLabel is the metrics label of a record: its event type, or its kind
// when siteops made it.
func TypeLabel(ev store.InboxEvent) string {
	if ev.Kind != "" && ev.Kind != store.KindWebhook {
		return ev.Kind
	}
	return ev.EventType
}

// StartedTypes are the workflow types the relay starts with a signal
// (SignalWithStart): those of the routes with a Start, sorted, each once.
// They are all the ingress's Temporal identity ever starts: the role
// policy of siteops' server build lets it start these and no other
// (SITEOPS_TEMPORAL_RELAY_STARTS, wiring.TemporalPolicy).
func StartedTypes() []string {
	var types []string
	for _, rt := range append(Routes[:len(Routes):len(Routes)], LeadEventsRoute) {
		if rt.Start != nil && !slices.Contains(types, rt.Target.Name) {
			types = append(types, rt.Target.Name)
		}
	}
	slices.Sort(types)
	return types
}

// Signal is one signal the relay sends: its name, to the workflows whose
// IDs start with Prefix.
type Signal struct{ Prefix, Name string }

// SentSignals are the signals the relay sends, each once, sorted: with
// StartedTypes, all that the ingress's Temporal identity does (the role
// policy of siteops' server build lets it send these and no other,
// SITEOPS_TEMPORAL_RELAY_SIGNALS).
func SentSignals() []Signal {
	var out []Signal
	for _, rt := range append(Routes[:len(Routes):len(Routes)], LeadEventsRoute, VerifiedRoute) {
		if rt.Target.Name == "" {
			continue
		}
		if s := (Signal{rt.Target.Prefix, rt.Signal}); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Signal) int { return strings.Compare(a.Prefix+":"+a.Name, b.Prefix+":"+b.Name) })
	return out
}
