package simulator

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/siteops/siteops/agentsite/webhook"
)

// Lead listing limits.
const (
	DefaultLeadLimit = 50
	MaxLeadLimit     = 200
)

type lead struct {
	ID        string    `json:"id"`
	SiteID    string    `json:"site_id"`
	Name      string    `json:"name"`
	Email     string    `json:"email"`
	Phone     string    `json:"phone,omitempty"`
	Message   string    `json:"message"`
	Source    string    `json:"source"`
	CreatedAt time.Time `json:"created_at"`
}

var (
	firstNames = []string{"Ada", "Bruno", "Chidi", "Dana", "Elif", "Farah", "Goran", "Hana", "Ines", "Jonas", "Kiri", "Luca", "Mei", "Nia", "Omar", "Priya"}
	lastNames  = []string{"Okafor", "Lindqvist", "Moreau", "Tanaka", "Silva", "Novak", "Haddad", "Kowalski", "Reyes", "Byrne"}
	messages   = []string{
		"Can I book a demo next week?",
		"Do you ship to Canada?",
		"What does the premium plan include?",
		"Please call me back about a quote.",
		"Is there a discount for nonprofits?",
		"I'd like to talk to sales.",
	}
)

// addLeadsLocked appends n leads to st and emits lead.created for each.
func (s *Simulator) addLeadsLocked(st *site, n int) []string {
	ids := make([]string, 0, n)
	for range n {
		first := firstNames[int(s.float()*float64(len(firstNames)))]
		last := lastNames[int(s.float()*float64(len(lastNames)))]
		id := s.nextID("lead")
		l := lead{
			ID: id, SiteID: st.ID, Name: first + " " + last,
			Email:     fmt.Sprintf("%s.%s.%s@example.com", lower(first), lower(last), id),
			Message:   messages[int(s.float()*float64(len(messages)))],
			Source:    "agent",
			CreatedAt: s.now().UTC(),
		}
		st.leads = append(st.leads, l)
		ids = append(ids, id)
		s.emitLocked(webhook.LeadCreated, webhook.LeadCreatedData{SiteID: st.ID, LeadID: id})
	}
	return ids
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func (s *Simulator) listLeads(r *http.Request, _ []byte) response {
	q := r.URL.Query()
	limit := DefaultLeadLimit
	if v := q.Get("limit"); v != "" || q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLeadLimit {
			return fail(http.StatusBadRequest, "invalid_limit", fmt.Sprintf("limit must be an integer from 1 to %d", MaxLeadLimit), "limit")
		}
		limit = n
	}
	siteID := r.PathValue("site_id")
	start := 0
	if q.Has("cursor") {
		pos, err := s.openCursor(siteID, q.Get("cursor"))
		if err != nil {
			return fail(http.StatusBadRequest, "invalid_cursor", err.Error(), "cursor")
		}
		start = pos
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	st, bad := s.siteLocked(r)
	if bad != nil {
		return *bad
	}
	if start > len(st.leads) {
		return fail(http.StatusBadRequest, "invalid_cursor", "the cursor points past the collection", "cursor")
	}
	end := min(start+limit, len(st.leads))
	page := make([]json.RawMessage, 0, end-start)
	for _, l := range st.leads[start:end] {
		b, _ := json.Marshal(l)
		page = append(page, b)
	}
	var next *string
	if end < len(st.leads) {
		c := s.sealCursor(siteID, end)
		next = &c
	}
	return ok(http.StatusOK, map[string]any{"data": page, "next_cursor": next})
}

// A cursor is base64(std) of: 8-byte position, site id, 16-byte MAC over
// both under the simulator's cursor key. Standard base64 is chosen on
// purpose: its + / = must survive the client's URL encoding.
func (s *Simulator) sealCursor(siteID string, pos int) string {
	buf := binary.BigEndian.AppendUint64(nil, uint64(pos)) //nolint:gosec // pos is an index into a slice, never negative
	buf = append(buf, siteID...)
	buf = append(buf, s.cursorMAC(buf)...)
	return base64.StdEncoding.EncodeToString(buf)
}

func (s *Simulator) cursorMAC(b []byte) []byte {
	m := hmac.New(sha256.New, s.cursorKey[:])
	m.Write(b)
	return m.Sum(nil)[:16]
}

func (s *Simulator) openCursor(siteID, token string) (int, error) {
	raw, err := base64.StdEncoding.DecodeString(token)
	if err != nil || len(raw) < 8+16 {
		return 0, fmt.Errorf("the cursor is not one this API issued; send next_cursor back unchanged (URL-encoded)")
	}
	body, mac := raw[:len(raw)-16], raw[len(raw)-16:]
	if !hmac.Equal(mac, s.cursorMAC(body)) {
		return 0, fmt.Errorf("the cursor is not one this API issued; send next_cursor back unchanged (URL-encoded)")
	}
	if string(body[8:]) != siteID {
		return 0, fmt.Errorf("the cursor belongs to another collection; cursors are bound to the site that produced them")
	}
	pos := binary.BigEndian.Uint64(body[:8])
	if pos > 1<<40 {
		return 0, fmt.Errorf("the cursor is out of range")
	}
	return int(pos), nil
}
