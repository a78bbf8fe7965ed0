package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/siteops/siteops/agentsite"
)

// SyncLeadsInput pulls a site's leads from a position in its collection.
type SyncLeadsInput struct {
	SiteID string `json:"site_id"`
	// From is the cursor of the first page to read; nil reads from the start.
	From *agentsite.Cursor `json:"from,omitempty"`
	// Limit is the page size (0 lets the server choose).
	Limit int `json:"limit,omitempty"`
	// MaxPages bounds one activity run so that it returns to the workflow
	// regularly; 0 means no bound.
	MaxPages int `json:"max_pages,omitempty"`
}

// SyncLeadsResult carries counts and the resume point, never lead records.
type SyncLeadsResult struct {
	Pages int `json:"pages"`
	Leads int `json:"leads"`
	// Resume is the cursor to read from next time: the cursor of the last
	// page read, so that leads appended to that page later are picked up.
	// nil means the start of the collection.
	Resume *agentsite.Cursor `json:"resume,omitempty"`
	// CaughtUp is true when the last page read had no next_cursor.
	CaughtUp bool `json:"caught_up"`
}

// syncProgress is heartbeated after each stored page; a retried attempt
// resumes from it instead of from the input.
type syncProgress struct {
	Pages  int               `json:"pages"`
	Leads  int               `json:"leads"`
	Resume *agentsite.Cursor `json:"resume,omitempty"`
	Next   *agentsite.Cursor `json:"next,omitempty"`
	Done   bool              `json:"done,omitempty"`
}

// SyncLeads reads pages of leads and upserts each page into the store in one
// statement before reading the next, heartbeating the position and counts.
// The records stay in the store; the result holds counts and cursors.
func (a *Activities) SyncLeads(ctx context.Context, in SyncLeadsInput) (SyncLeadsResult, error) {
	p := syncProgress{Resume: in.From, Next: in.From}
	if activity.HasHeartbeatDetails(ctx) {
		var saved syncProgress
		if err := activity.GetHeartbeatDetails(ctx, &saved); err == nil {
			p = saved
			activity.GetLogger(ctx).Info("resuming lead sync from the last heartbeat", "site_id", in.SiteID, "pages", p.Pages)
		}
	}
	if p.Done {
		return SyncLeadsResult{Pages: p.Pages, Leads: p.Leads, Resume: p.Resume, CaughtUp: true}, nil
	}
	log := activity.GetLogger(ctx)
	started := time.Now()
	for page, err := range a.API.LeadPages(ctx, in.SiteID, agentsite.ListLeadsOptions{Limit: in.Limit, Cursor: p.Next}) {
		if err != nil {
			return SyncLeadsResult{}, classify(err)
		}
		if _, err := a.Store.UpsertLeads(ctx, in.SiteID, page.Leads); err != nil {
			return SyncLeadsResult{}, classify(err)
		}
		p.Pages++
		p.Leads += len(page.Leads)
		if a.leadsSynced != nil {
			a.leadsSynced.Add(ctx, int64(len(page.Leads)))
		}
		p.Resume = p.Next
		p.Next = page.Next
		p.Done = page.Next == nil
		activity.RecordHeartbeat(ctx, p)
		if page.Next == nil {
			break
		}
		if in.MaxPages > 0 && p.Pages >= in.MaxPages {
			log.Info("lead sync paused at the page budget", "site_id", in.SiteID, "pages", p.Pages)
			return SyncLeadsResult{Pages: p.Pages, Leads: p.Leads, Resume: p.Next}, nil
		}
	}
	log.Info("lead sync caught up", "site_id", in.SiteID, "pages", p.Pages, "leads", p.Leads, "took", time.Since(started).Round(time.Millisecond))
	return SyncLeadsResult{Pages: p.Pages, Leads: p.Leads, Resume: p.Resume, CaughtUp: true}, nil
}
