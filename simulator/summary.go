package simulator

import (
	"maps"
	"net/http"
	"slices"
)

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

// RequestStats counts the API requests answered since the simulator
// started. Unlike the request log it is never trimmed, so a benchmark can
// read, for example, how many 429s it was sent.
type RequestStats struct {
	// Requests is the number of API requests answered.
	Requests int `json:"requests"`
	// ByStatus counts answers by HTTP status (429 under "429").
	ByStatus map[int]int `json:"by_status"`
	// ByFault counts answers decided by a fault: "fixed_rate_limit" (the
	// per-key limit of Faults.RateLimitRPS), "rate_limit", "error",
	// "drop_after_apply", "broken_answer".
	ByFault map[string]int `json:"by_fault"`
	// RateLimitedByKey counts 429 answers by key fingerprint (see KeyID).
	RateLimitedByKey map[string]int `json:"rate_limited_by_key"`
}

func (st *RequestStats) add(rec RequestRecord) {
	if st.ByStatus == nil {
		st.ByStatus, st.ByFault, st.RateLimitedByKey = map[int]int{}, map[string]int{}, map[string]int{}
	}
	st.Requests++
	st.ByStatus[rec.Status]++
	if rec.Fault != "" {
		st.ByFault[rec.Fault]++
	}
	if rec.Status == http.StatusTooManyRequests && rec.KeyID != "" {
		st.RateLimitedByKey[rec.KeyID]++
	}
}

// RequestStats returns the counts of API answers so far.
func (s *Simulator) RequestStats() RequestStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := RequestStats{Requests: s.stats.Requests, ByStatus: map[int]int{}, ByFault: map[string]int{}, RateLimitedByKey: map[string]int{}}
	maps.Copy(out.ByStatus, s.stats.ByStatus)
	maps.Copy(out.ByFault, s.stats.ByFault)
	maps.Copy(out.RateLimitedByKey, s.stats.RateLimitedByKey)
	return out
}
