package webhook

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// CreatedAtLayout is the layout of the envelope's created_at: ISO 8601 in UTC
// with milliseconds.
const CreatedAtLayout = "2006-01-02T15:04:05.000Z"

// EventIDPrefix starts every event identifier.
const EventIDPrefix = "evt_"

// Envelope is the stable outer shape of every delivery. Data is kept raw
// because its fields depend on the event type and may grow; unknown fields of
// the envelope itself are ignored when decoding.
type Envelope struct {
	ID        string          `json:"id"`
	Type      EventType       `json:"type"`
	CreatedAt time.Time       `json:"created_at"`
	Data      json.RawMessage `json:"data"`
}

type wireEnvelope struct {
	ID        string          `json:"id"`
	Type      EventType       `json:"type"`
	CreatedAt string          `json:"created_at"`
	Data      json.RawMessage `json:"data"`
}

// MarshalJSON writes created_at in CreatedAtLayout, as the service does.
func (e Envelope) MarshalJSON() ([]byte, error) {
	data := e.Data
	if data == nil {
		data = json.RawMessage("{}")
	}
	return json.Marshal(wireEnvelope{
		ID:        e.ID,
		Type:      e.Type,
		CreatedAt: e.CreatedAt.UTC().Format(CreatedAtLayout),
		Data:      data,
	})
}

// UnmarshalJSON accepts any RFC 3339 created_at, so that a sender that drops
// the milliseconds is not refused for it.
func (e *Envelope) UnmarshalJSON(b []byte) error {
	var w wireEnvelope
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	var created time.Time
	if w.CreatedAt != "" {
		t, err := time.Parse(time.RFC3339Nano, w.CreatedAt)
		if err != nil {
			return fmt.Errorf("created_at %q is not an ISO 8601 timestamp: %w", w.CreatedAt, err)
		}
		created = t.UTC()
	}
	*e = Envelope{ID: w.ID, Type: w.Type, CreatedAt: created, Data: w.Data}
	return nil
}

// Validate checks what a receiver can check of a verified envelope on its
// own: an evt_ id and a type. It does not refuse unknown types, which a
// receiver records and ignores.
func (e Envelope) Validate() error {
	if !strings.HasPrefix(e.ID, EventIDPrefix) || len(e.ID) == len(EventIDPrefix) {
		return fmt.Errorf("envelope id %q does not start with %s", e.ID, EventIDPrefix)
	}
	if e.Type == "" {
		return fmt.Errorf("envelope of event %s has no type", e.ID)
	}
	return nil
}

// LeadCreatedData is the data of a lead.created event.
type LeadCreatedData struct {
	SiteID string `json:"site_id"`
	LeadID string `json:"lead_id"`
}
