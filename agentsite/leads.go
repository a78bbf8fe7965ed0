package agentsite

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
)

// Lead is one lead record. The contract does not show its fields, so the
// record is kept raw; ID and SiteID are read from it for keying. Leads carry
// personal data: LogValue shows only the id.
type Lead struct {
	ID     string
	SiteID string
	Raw    json.RawMessage
}

// UnmarshalJSON keeps the whole record and reads its id.
func (l *Lead) UnmarshalJSON(b []byte) error {
	var keys struct {
		ID     string `json:"id"`
		SiteID string `json:"site_id"`
	}
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	*l = Lead{ID: keys.ID, SiteID: keys.SiteID, Raw: append(json.RawMessage(nil), b...)}
	return nil
}

// MarshalJSON writes the record as it was received.
func (l Lead) MarshalJSON() ([]byte, error) {
	if l.Raw == nil {
		return []byte("null"), nil
	}
	return l.Raw, nil
}

// LogValue keeps personal data out of logs.
func (l Lead) LogValue() slog.Value { return slog.StringValue(l.ID) }

// Cursor is an opaque position in one site's lead collection. It is never
// decoded, edited or inspected; it remembers which site's collection
// produced it, and the client refuses it for any other site. It marshals to
// JSON so that it can be kept in workflow state and heartbeats.
type Cursor struct {
	siteID string
	token  string
}

type wireCursor struct {
	SiteID string `json:"site_id"`
	Token  string `json:"token"`
}

// MarshalJSON implements json.Marshaler.
func (c Cursor) MarshalJSON() ([]byte, error) { return json.Marshal(wireCursor{c.siteID, c.token}) }

// UnmarshalJSON implements json.Unmarshaler.
func (c *Cursor) UnmarshalJSON(b []byte) error {
	var w wireCursor
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	c.siteID, c.token = w.SiteID, w.Token
	return nil
}

// SiteID is the site whose collection the cursor belongs to.
func (c Cursor) SiteID() string { return c.siteID }

// LogValue shows which collection a cursor belongs to, not the token.
func (c Cursor) LogValue() slog.Value { return slog.StringValue("cursor(" + c.siteID + ")") }

// LeadPage is one page of a site's leads. Next is nil on the last page.
type LeadPage struct {
	Leads []Lead
	Next  *Cursor
}

// ListLeadsOptions selects a page. A zero Limit lets the server choose; a
// nil Cursor starts at the beginning of the collection.
type ListLeadsOptions struct {
	Limit  int
	Cursor *Cursor
}

// ListLeads reads one page of a site's leads.
//
// GET /api/v1/sites/{site_id}/leads?limit=&cursor= (scope leads:read).
func (c *Client) ListLeads(ctx context.Context, siteID string, opts ListLeadsOptions) (*LeadPage, error) {
	if err := requireID("site_id", siteID); err != nil {
		return nil, err
	}
	if opts.Limit < 0 {
		return nil, &ValidationError{Field: "limit", Value: strconv.Itoa(opts.Limit), Reason: "must be positive, or zero for the server's default"}
	}
	r := newRequest(http.MethodGet, "/sites/{site_id}/leads", siteID)
	r.query = url.Values{}
	if opts.Limit > 0 {
		r.query.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != nil {
		if opts.Cursor.siteID != siteID {
			return nil, &ValidationError{Field: "cursor", Reason: fmt.Sprintf("the cursor belongs to the leads of site %s, not %s; cursors are bound to one collection", opts.Cursor.siteID, siteID)}
		}
		r.query.Set("cursor", opts.Cursor.token) // url.Values.Encode escapes it
	}
	var out struct {
		Data       []Lead  `json:"data"`
		NextCursor *string `json:"next_cursor"`
	}
	r.answer = "{ data: [lead, ...], next_cursor: string or null }"
	meta, err := c.do(ctx, r, &out)
	if err != nil {
		return nil, err
	}
	for i, l := range out.Data {
		if l.ID == "" {
			return nil, c.contractError(r, meta, fmt.Sprintf("lead %d of the page has no id, so it cannot be stored or told apart from the others", i), nil)
		}
	}
	page := &LeadPage{Leads: out.Data}
	if out.NextCursor != nil && *out.NextCursor != "" {
		page.Next = &Cursor{siteID: siteID, token: *out.NextCursor}
	}
	return page, nil
}

// LeadPages iterates over the pages of a site's leads from opts.Cursor,
// following next_cursor until it is null. It stops after yielding the first
// error.
func (c *Client) LeadPages(ctx context.Context, siteID string, opts ListLeadsOptions) iter.Seq2[*LeadPage, error] {
	return func(yield func(*LeadPage, error) bool) {
		// followed holds the tokens of this iteration, so that a cursor
		// that leads back to any earlier page, not only to the last one,
		// stops it: a few dozen bytes per page read.
		followed := map[string]bool{}
		if opts.Cursor != nil {
			followed[opts.Cursor.token] = true
		}
		for {
			page, err := c.ListLeads(ctx, siteID, opts)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(page, nil) || page.Next == nil {
				return
			}
			if followed[page.Next.token] {
				r := newRequest(http.MethodGet, "/sites/{site_id}/leads", siteID)
				yield(nil, c.contractError(r, nil, "next_cursor repeats a cursor this iteration already followed, so following it would read the same pages for ever", ErrCursorStuck))
				return
			}
			followed[page.Next.token] = true
			opts.Cursor = page.Next
		}
	}
}
