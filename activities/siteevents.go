package activities

import (
	"context"

	"github.com/siteops/siteops/agentsite/webhook"
)

// SiteEventsInput asks what the inbox already holds for an onboarding's
// site: which of KnowledgeIDs were reported ready, and the site's latest
// publication event.
type SiteEventsInput struct {
	SiteID       string   `json:"site_id"`
	KnowledgeIDs []string `json:"knowledge_ids"`
}

// SiteEventsResult carries ids and event types only, never bodies.
type SiteEventsResult struct {
	// Ready lists the asked knowledge ids that have a knowledge.ready in
	// the inbox, in the order asked, each once.
	Ready []string `json:"ready,omitempty"`
	// LastSiteEventID and LastSiteEvent name the latest site.published or
	// site.unpublished of the site (by the time it was received); empty
	// when there is none.
	LastSiteEventID string `json:"last_site_event_id,omitempty"`
	LastSiteEvent   string `json:"last_site_event,omitempty"`
}

// SiteEvents reads the inbox for the site's knowledge.ready, site.published
// and site.unpublished events, so that an onboarding's waits are level
// triggered: what was delivered before it waited, while no run listened, or
// to an earlier run of the same workflow ID counts as much as a signal. It
// reads the ingress's record of verified deliveries, which is the same
// truth the relay signals from, and changes nothing.
func (a *Activities) SiteEvents(ctx context.Context, in SiteEventsInput) (SiteEventsResult, error) {
	evs, err := a.store.SiteEvents(ctx, in.SiteID)
	if err != nil {
		return SiteEventsResult{}, err // a store error: retried under the policy
	}
	ready := map[string]bool{}
	var res SiteEventsResult
	for _, ev := range evs {
		switch webhook.EventType(ev.EventType) {
		case webhook.KnowledgeReady:
			ready[ev.KnowledgeID] = true
		case webhook.SitePublished, webhook.SiteUnpublished:
			res.LastSiteEventID, res.LastSiteEvent = ev.EventID, ev.EventType
		}
	}
	for _, id := range in.KnowledgeIDs {
		if id != "" && ready[id] {
			res.Ready = append(res.Ready, id)
			ready[id] = false // once, however often it was asked
		}
	}
	return res, nil
}
