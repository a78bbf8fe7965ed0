package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
)

// DefaultStallTimeout is how long a lead sync may go without storing a
// page before it gives up, when its input does not say.
const DefaultStallTimeout = time.Hour

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
	// StallTimeout is how long attempts may fail on transient errors
	// (throttling, 5xx, timeouts, the network) without a page stored
	// before the sync fails (DefaultStallTimeout when zero). Every stored
	// page starts it again: progress resets the retry budget.
	StallTimeout time.Duration `json:"stall_timeout,omitempty"`
	// StallSince is when the stall clock started, for a sync that goes on
	// where one cut short left off (its result's LastPageAt); zero starts
	// the clock now. It keeps a sync that is cut short again and again
	// from never reaching its stall timeout.
	StallSince time.Time `json:"stall_since,omitzero"`
	// SyncKey names the sync this run belongs to (the workflow makes it
	// once per sync and hands it on when it cuts the sync short). With it,
	// each page is stored together with the sync's position, in one
	// transaction, and every attempt — a retry, or the next run's activity
	// of a sync cut short — goes on from the position the store holds for
	// the key, before From and the heartbeat: no page the sync stored is
	// read again. The result's counts are then the sync's since it began,
	// across activities. Empty: positions live in heartbeats alone, as
	// before.
	SyncKey string `json:"sync_key,omitempty"`
}

// SyncLeadsResult carries counts and the resume point, never lead records.
type SyncLeadsResult struct {
	Pages int `json:"pages"`
	// Leads is how many lead records were read (a re-read page counts
	// again); New is how many of them this run's attempts found not stored
	// before (without a SyncKey, a page stored by an attempt that died
	// before it heartbeated is not new to the next one, so New can fall
	// short). With a SyncKey, Pages, Leads and New are the sync's since
	// it began, across the activities of a sync cut short, and exact.
	Leads int `json:"leads"`
	New   int `json:"new"`
	// Stored is how many distinct leads of the site the store holds at the
	// end of the run, counted there: the number to report, right whatever
	// attempts failed or re-read. nil when counting failed.
	Stored *int `json:"stored,omitempty"`
	// Resume is the cursor to read from next time: the cursor of the last
	// page read, so that leads appended to that page later are picked up.
	// nil means the start of the collection.
	Resume *agentsite.Cursor `json:"resume,omitempty"`
	// CaughtUp is true when the last page read had no next_cursor.
	CaughtUp bool `json:"caught_up"`
	// LastPageAt is when the run last stored a page (or its stall clock
	// started): what a run cut short hands on as StallSince.
	LastPageAt time.Time `json:"last_page_at,omitzero"`
}

// syncProgress is heartbeated after each stored page and while waiting; a
// retried attempt resumes from it instead of from the input (or from the
// store's position, with a SyncKey). Its fields are those of
// store.LeadSyncPosition, in the same order, so that each converts to the
// other.
type syncProgress struct {
	Pages  int               `json:"pages"`
	Leads  int               `json:"leads"`
	New    int               `json:"new"`
	Resume *agentsite.Cursor `json:"resume,omitempty"`
	Next   *agentsite.Cursor `json:"next,omitempty"`
	Done   bool              `json:"done,omitempty"`
	// LastPageAt is when a page was last stored (or the first attempt
	// began): the stall clock, which survives failed attempts.
	LastPageAt time.Time `json:"last_page_at"`
}

func (p syncProgress) result(caughtUp bool) SyncLeadsResult {
	return SyncLeadsResult{Pages: p.Pages, Leads: p.Leads, New: p.New, Resume: p.Resume, CaughtUp: caughtUp, LastPageAt: p.LastPageAt}
}

// paused is the result of a run that stops before the end of the
// collection: the next one starts at the first page not read.
func (p syncProgress) paused() SyncLeadsResult {
	r := p.result(false)
	r.Resume = p.Next
	return r
}

// SyncLeads reads pages of leads and upserts each page into the store in one
// transaction before reading the next, heartbeating the position and
// counts. The records stay in the store; the result holds counts and
// cursors.
//
// Transient errors fail the attempt and Temporal retries it from the last
// stored page, for as long as pages keep being stored: the sync fails only
// on an error no retry can fix (401, 403, 404, a broken contract), or when
// no page was stored for StallTimeout, and then it says so with the last
// error.
//
// When the workflow cancels it (to continue as new while it runs), it
// returns a *temporal.CanceledError whose details are the SyncLeadsResult
// so far, paused at the first page not stored.
func (a *Activities) SyncLeads(ctx context.Context, in SyncLeadsInput) (SyncLeadsResult, error) {
	stall := in.StallTimeout
	if stall <= 0 {
		stall = DefaultStallTimeout
	}
	log := activity.GetLogger(ctx)
	p := syncProgress{Resume: in.From, Next: in.From, LastPageAt: a.now()}
	if !in.StallSince.IsZero() {
		p.LastPageAt = in.StallSince
	}
	if activity.HasHeartbeatDetails(ctx) {
		var saved syncProgress
		if err := activity.GetHeartbeatDetails(ctx, &saved); err == nil {
			p = saved
			log.Info("resuming lead sync from the last heartbeat", "site_id", in.SiteID, "pages", p.Pages)
		}
	}
	if in.SyncKey != "" {
		// The store's position was written with its page; a heartbeat
		// may lag it by the pages stored since it was last sent.
		pos, err := a.store.LeadSyncPosition(ctx, in.SiteID, in.SyncKey)
		switch {
		case err == nil:
			p = syncProgress(pos)
			log.Info("resuming lead sync from its stored position", "site_id", in.SiteID, "pages", p.Pages)
		case !errors.Is(err, store.ErrNotFound):
			return SyncLeadsResult{}, a.stalled(err, p, stall)
		}
	}
	if p.Done {
		return a.counted(ctx, in.SiteID, p.result(true)), nil
	}
	hb := startHeartbeat(ctx, p, in.SyncKey != "")
	defer hb.stop()
	started := time.Now()
	p, done, err := a.readPages(ctx, in, p, hb.set)
	if err != nil {
		hb.keep()
		return SyncLeadsResult{}, a.failed(ctx, in.SiteID, err, hb.get(), stall)
	}
	if !done {
		log.Info("lead sync paused at the page budget", "site_id", in.SiteID, "pages", p.Pages)
		return a.counted(ctx, in.SiteID, p.paused()), nil
	}
	a.caughtUp(ctx)
	log.Info("lead sync caught up", "site_id", in.SiteID, "pages", p.Pages, "new_leads", p.New, "took", time.Since(started).Round(time.Millisecond))
	return a.counted(ctx, in.SiteID, p.result(true)), nil
}

// readPages reads the site's pages from p.Next and stores each
// (storePage) before it reads the next, calling stored with the progress
// after each, until the page without a next_cursor (done) or in.MaxPages
// pages since the sync began. On an error it returns the progress of the
// last page stored.
func (a *Activities) readPages(ctx context.Context, in SyncLeadsInput, p syncProgress, stored func(syncProgress)) (_ syncProgress, done bool, _ error) {
	for page, err := range a.api.LeadPages(a.calling(ctx, agentsite.ClassBulk), in.SiteID, agentsite.ListLeadsOptions{Limit: in.Limit, Cursor: p.Next}) {
		if err != nil {
			return p, false, err
		}
		next := p
		next.Pages++
		next.Leads += len(page.Leads)
		next.Resume = p.Next
		next.Next = page.Next
		next.Done = page.Next == nil
		next.LastPageAt = a.now()
		fresh, err := a.storePage(ctx, in, page.Leads, next)
		if err != nil {
			return p, false, err
		}
		next.New += fresh
		p = next
		a.countPage(ctx, fresh)
		stored(p)
		if page.Next == nil {
			return p, true, nil
		}
		if in.MaxPages > 0 && p.Pages >= in.MaxPages {
			return p, false, nil
		}
	}
	return p, true, nil
}

// storePage upserts a page of leads and, for a sync with a key, the
// position after it (p, before the page's new leads are counted) in the
// same transaction. It returns how many of the page's leads were new.
func (a *Activities) storePage(ctx context.Context, in SyncLeadsInput, leads []agentsite.Lead, p syncProgress) (int, error) {
	if in.SyncKey == "" {
		return a.store.UpsertLeads(ctx, in.SiteID, leads)
	}
	return a.store.UpsertLeadsAt(ctx, in.SiteID, in.SyncKey, leads, store.LeadSyncPosition(p))
}

// failed turns the error that ended an attempt into what the activity
// returns: the progress so far when the workflow cancelled the run, the
// classified error otherwise.
func (a *Activities) failed(ctx context.Context, siteID string, err error, p syncProgress, stall time.Duration) error {
	// Only a cancel the server sent has a *temporal.CanceledError cause; a
	// worker shutting down cancels with another, and its attempt must fail
	// as retryable so that another worker goes on from the heartbeat.
	if ctx.Err() != nil && temporal.IsCanceledError(context.Cause(ctx)) {
		r := a.counted(context.WithoutCancel(ctx), siteID, p.paused())
		activity.GetLogger(ctx).Info("lead sync cut short by its workflow", "site_id", siteID, "pages", p.Pages)
		return temporal.NewCanceledError(r)
	}
	return a.stalled(classify(err), p, stall)
}

// counted sets r.Stored to the store's count of the site's leads. A count
// that fails leaves it nil (the workflow adds New instead, as before it
// had the count) rather than failing a run whose pages are stored.
func (a *Activities) counted(ctx context.Context, siteID string, r SyncLeadsResult) SyncLeadsResult {
	cctx, cancel := context.WithTimeout(ctx, countTimeout)
	defer cancel()
	n, err := a.store.CountLeads(cctx, siteID)
	if err != nil {
		activity.GetLogger(ctx).Warn("counting the stored leads failed; the sync's lead count stays as it was", "site_id", siteID, "error", err)
		return r
	}
	r.Stored = &n
	return r
}

// countTimeout bounds counting a site's stored leads at the end of a run.
const countTimeout = 10 * time.Second

// stalled turns a transient error into a permanent one when no page was
// stored for the stall timeout.
func (a *Activities) stalled(err error, p syncProgress, stall time.Duration) error {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.NonRetryable() {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	since := a.now().Sub(p.LastPageAt)
	if since < stall {
		return err
	}
	msg := err.Error()
	if app != nil {
		msg = app.Message()
	}
	return nonRetryable(ErrTypeStalled, fmt.Errorf("no page of leads stored for %s (the stall timeout is %s); last error: %s", since.Round(time.Second), stall, msg))
}

// heartbeat records the sync's progress every few seconds, also while
// the activity waits (for the API's rate limit, say), so that a long wait
// does not time the attempt out.
//
// A keyed sync (SyncKey) keeps its position in the store with each page,
// so its heartbeats carry nothing a retry needs: it sends none before its
// first tick, and a sync that ends sooner (a lead event's, nearly always)
// costs no heartbeat at all — each one sent is a Temporal action — except
// an attempt that fails, which records its stall clock for the next. An
// unkeyed sync (runs before keys) keeps its position in heartbeats alone,
// so it records one at the start and after every page, as before.
type heartbeat struct {
	ctx   context.Context
	keyed bool
	mu    sync.Mutex
	p     syncProgress
	stop  func()
}

const heartbeatEvery = 5 * time.Second

func startHeartbeat(ctx context.Context, p syncProgress, keyed bool) *heartbeat {
	h := &heartbeat{ctx: ctx, keyed: keyed, p: p}
	if !keyed {
		activity.RecordHeartbeat(ctx, p)
	}
	h.stop = tick(ctx, heartbeatEvery, func() { activity.RecordHeartbeat(ctx, h.get()) })
	return h
}

func (h *heartbeat) set(p syncProgress) {
	h.mu.Lock()
	h.p = p
	h.mu.Unlock()
	if !h.keyed {
		activity.RecordHeartbeat(h.ctx, p)
	}
}

// keep records the progress of a keyed sync whose attempt is about to
// fail, so that the next attempt keeps its stall clock (LastPageAt) even
// when no page was stored; an unkeyed sync recorded it already.
func (h *heartbeat) keep() {
	if h.keyed {
		activity.RecordHeartbeat(h.ctx, h.get())
	}
}

func (h *heartbeat) get() syncProgress {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.p
}
