package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// SiteEvent is a verified knowledge.ready, site.published or
// site.unpublished delivery about one site, as the inbox holds it.
type SiteEvent struct {
	EventID    string
	EventType  string
	ReceivedAt time.Time
	// KnowledgeID is the source a knowledge.ready is about.
	KnowledgeID string
	// Status is the site's status a site.published or site.unpublished
	// reports.
	Status string
}

// SiteEventTypes are the event types an onboarding reads from the inbox
// (SiteEvents): the types whose route targets the site's onboarding
// (the relay's route table; a test there holds the two together).
// The partial index inbox_site_events holds exactly these (migration
// 00007; a test here holds it to this list): a type added here needs a
// migration that rebuilds the index, and its case in activities'
// SiteEvents.
var SiteEventTypes = []string{"knowledge.ready", "site.published", "site.unpublished"}

// siteEventTypesSQL is SiteEventTypes as the index's IN list, word for
// word, so that SQLite sees that the query may use the index.
func siteEventTypesSQL() string {
	quoted := make([]string, len(SiteEventTypes))
	for i, t := range SiteEventTypes {
		quoted[i] = "'" + t + "'"
	}
	return strings.Join(quoted, ", ")
}

// SiteEvents returns the knowledge.ready, site.published and
// site.unpublished events of a site that the inbox holds, oldest first,
// whether or not the relay has dispatched them: an onboarding reads them so
// that it never depends on a signal it missed, got early, or that went to
// an earlier run. It only reads. Events the purge removed (dispatched ones
// past the inbox's retention) are gone from its answer.
//
// The site id sits in each event's body, which the database does not
// index: the query takes only the three types (a partial index holds just
// them) and bodies that contain the id's JSON string, and each body is then
// decoded and checked here, so that another site whose id merely contains
// this one is never taken for it.
func (s *Store) SiteEvents(ctx context.Context, siteID string) ([]SiteEvent, error) {
	if siteID == "" {
		return nil, fmt.Errorf("store: reading a site's events needs its id")
	}
	quoted, err := json.Marshal(siteID)
	if err != nil {
		return nil, err
	}
	contains := `instr(body, $2) > 0`
	if s.dialect == Postgres {
		contains = `position($2::bytea in body) > 0`
	}
	// Only the containment test differs by dialect; the id is a bound
	// argument. The type list is the partial index's, word for word, so
	// that SQLite sees the query may use it.
	where := `event_type IN (` + siteEventTypesSQL() + `) AND kind = $1 AND ` + contains                                //nolint:gosec // constants and placeholders only
	q := `SELECT event_id, event_type, received_at, body FROM inbox WHERE ` + where + ` ORDER BY received_at, event_id` //nolint:gosec // as above
	rows, err := s.db.QueryContext(ctx, q, KindWebhook, quoted)
	if err != nil {
		return nil, fmt.Errorf("store: reading the events of site %s: %w", siteID, err)
	}
	defer func() { _ = rows.Close() }()
	var out []SiteEvent
	for rows.Next() {
		var ev SiteEvent
		var body []byte
		if err := rows.Scan(&ev.EventID, &ev.EventType, &ev.ReceivedAt, &body); err != nil {
			return nil, fmt.Errorf("store: reading the events of site %s: %w", siteID, err)
		}
		var env struct {
			Data struct {
				SiteID      string `json:"site_id"`
				KnowledgeID string `json:"knowledge_id"`
				Status      string `json:"status"`
			} `json:"data"`
		}
		if json.Unmarshal(body, &env) != nil || env.Data.SiteID != siteID {
			continue // not an envelope, or another site's id that contains this one
		}
		ev.KnowledgeID, ev.Status = env.Data.KnowledgeID, env.Data.Status
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reading the events of site %s: %w", siteID, err)
	}
	return out, nil
}
