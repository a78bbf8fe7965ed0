package simulator

import "slices"

// SiteSummary is what the simulator holds for a site, for tests and the
// demo to compare against.
type SiteSummary struct {
	ID             string   `json:"id"`
	Slug           string   `json:"slug"`
	Status         string   `json:"status"`
	Knowledge      int      `json:"knowledge"`
	KnowledgeReady int      `json:"knowledge_ready"`
	FAQs           int      `json:"faqs"`
	Leads          int      `json:"leads"`
	EmbedEnabled   bool     `json:"embed_enabled"`
	AllowedOrigins []string `json:"allowed_origins"`
}

// Sites summarizes every site, in creation order.
func (s *Simulator) Sites() []SiteSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SiteSummary, 0, len(s.sites))
	for _, st := range s.sites {
		sum := SiteSummary{
			ID: st.ID, Slug: st.Slug, Status: st.Status, Knowledge: len(st.knowledge), FAQs: len(st.faqs), Leads: len(st.leads),
			EmbedEnabled: st.agent.EmbedEnabled, AllowedOrigins: append([]string(nil), st.agent.AllowedOrigins...),
		}
		for _, k := range st.knowledge {
			if k.Status == "ready" {
				sum.KnowledgeReady++
			}
		}
		out = append(out, sum)
	}
	slices.SortFunc(out, func(a, b SiteSummary) int { return idCompare(a.ID, b.ID) })
	return out
}

// LeadIDs returns the ids of a site's leads, oldest first.
func (s *Simulator) LeadIDs(siteID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.sites[siteID]
	if st == nil {
		return nil
	}
	ids := make([]string, len(st.leads))
	for i, l := range st.leads {
		ids[i] = l.ID
	}
	return ids
}
