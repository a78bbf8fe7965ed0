package simulator

import (
	"errors"
	"io"
	"net/http"

	"github.com/siteops/siteops/agentsite/webhook"
)

// CreateLeads adds n visitor leads to a site, each emitting lead.created,
// and returns their ids.
func (s *Simulator) CreateLeads(siteID string, n int) ([]string, error) {
	if n < 1 || n > 100_000 {
		return nil, errors.New("simulator: count must be from 1 to 100000")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.sites[siteID]
	if st == nil {
		return nil, errors.New("simulator: no site with id " + siteID)
	}
	return s.addLeadsLocked(st, n), nil
}

func readAdminJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "unreadable_body", "the body could not be read", "")
		return false
	}
	if len(body) == 0 {
		return true
	}
	if bad := decodeStrict(body, v); bad != nil {
		bad.write(w)
		return false
	}
	return true
}

func (s *Simulator) simCreateLeads(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Count int `json:"count"`
	}
	if !readAdminJSON(w, r, &in) {
		return
	}
	ids, err := s.CreateLeads(r.PathValue("site_id"), in.Count)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, "invalid", err.Error(), "count")
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"data": map[string]any{"lead_ids": ids, "count": len(ids)}})
}

func (s *Simulator) simConversation(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Messages int `json:"messages"`
	}
	if !readAdminJSON(w, r, &in) {
		return
	}
	if in.Messages < 0 || in.Messages > 1000 {
		writeError(w, http.StatusUnprocessableEntity, "invalid", "messages must be from 0 to 1000", "messages")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, bad := s.siteLocked(r)
	if bad != nil {
		bad.write(w)
		return
	}
	conv := s.nextID("conv")
	s.emitLocked(webhook.ConversationStarted, map[string]string{"site_id": st.ID, "conversation_id": conv})
	msgs := make([]string, 0, in.Messages)
	for range in.Messages {
		m := s.nextID("msg")
		msgs = append(msgs, m)
		s.emitLocked(webhook.ConversationMessageCreated, map[string]string{"site_id": st.ID, "conversation_id": conv, "message_id": m})
	}
	writeJSON(w, http.StatusCreated, map[string]any{"data": map[string]any{"conversation_id": conv, "message_ids": msgs}})
}

func (s *Simulator) simBroadcast(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, bad := s.siteLocked(r)
	if bad != nil {
		bad.write(w)
		return
	}
	id := s.nextID("bc")
	s.emitLocked(webhook.BroadcastSent, map[string]string{"site_id": st.ID, "broadcast_id": id})
	writeJSON(w, http.StatusCreated, map[string]any{"data": map[string]string{"broadcast_id": id}})
}

func (s *Simulator) simGetFaults(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"data": s.Faults()})
}

func (s *Simulator) simPutFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	if !readAdminJSON(w, r, &f) {
		return
	}
	if err := s.SetFaults(f); err != nil {
		writeError(w, http.StatusUnprocessableEntity, "invalid_faults", err.Error(), "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": f})
}

func (s *Simulator) simRequests(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"data": s.Requests()})
}

func (s *Simulator) simStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"data": s.RequestStats()})
}

func (s *Simulator) simEvents(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"data": s.Events()})
}

func (s *Simulator) simDeliveries(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"data": s.Deliveries()})
}
