package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/store"
)

// TestKnowledgeTextQuota bounds what the Nexus service's callers keep: a
// caller past its bytes is refused, another caller is not, every caller
// together is held to the total, a text already stored costs nothing, and
// the operators' texts count against no quota.
func TestKnowledgeTextQuota(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, _ *clock) {
		ctx := t.Context()
		q := store.TextQuota{PerOwner: 250, Total: 350}
		text := func(c byte) string { return strings.Repeat(string(c), 100) }
		for _, c := range []byte{'a', 'b'} {
			if _, err := s.PutKnowledgeTextAs(ctx, "nexus:partner", text(c), q); err != nil {
				t.Fatalf("text %c within the quota: %v", c, err)
			}
		}
		_, err := s.PutKnowledgeTextAs(ctx, "nexus:partner", text('c'), q)
		if !errors.Is(err, store.ErrQuotaExceeded) || !strings.Contains(err.Error(), "nexus:partner keeps 200 of its 250 bytes") {
			t.Fatalf("a third text past the caller's quota: %v; want ErrQuotaExceeded naming the caller and its bytes", err)
		}
		if _, err := s.PutKnowledgeTextAs(ctx, "nexus:partner", text('a'), q); err != nil {
			t.Errorf("a text the caller already stored again: %v; want it taken (it costs nothing)", err)
		}
		if _, err := s.PutKnowledgeTextAs(ctx, "nexus:other", text('d'), q); err != nil {
			t.Fatalf("another caller's first text: %v", err)
		}
		if _, err := s.PutKnowledgeTextAs(ctx, "nexus:other", text('e'), q); !errors.Is(err, store.ErrQuotaExceeded) || !strings.Contains(err.Error(), "together") {
			t.Errorf("a text past every caller's total: %v; want ErrQuotaExceeded naming the total", err)
		}
		hash, err := s.PutKnowledgeText(ctx, strings.Repeat("f", 1000))
		if err != nil {
			t.Fatalf("an operator's text: %v", err)
		}
		if got, err := s.KnowledgeText(ctx, hash); err != nil || len(got) != 1000 {
			t.Errorf("KnowledgeText(%s) = %d characters, %v", hash, len(got), err)
		}
	})
}

// TestPurgeKnowledgeTexts deletes texts nobody stored, referenced or read
// for the retention period, and keeps the ones an onboarding read.
func TestPurgeKnowledgeTexts(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		ctx := t.Context()
		old, err := s.PutKnowledgeTextAs(ctx, "nexus:partner", "stored and forgotten", store.TextQuota{})
		if err != nil {
			t.Fatal(err)
		}
		read, err := s.PutKnowledgeText(ctx, "stored, then read by an onboarding")
		if err != nil {
			t.Fatal(err)
		}
		c.Add(20 * 24 * time.Hour)
		if _, err := s.KnowledgeText(ctx, read); err != nil {
			t.Fatal(err)
		}
		c.Add(20 * 24 * time.Hour)
		n, err := s.PurgeKnowledgeTexts(ctx, c.Now().Add(-30*24*time.Hour))
		if err != nil || n != 1 {
			t.Fatalf("purged %d texts (%v); want 1, the one unused for 40 days", n, err)
		}
		if _, err := s.KnowledgeText(ctx, old); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the purged text: %v; want ErrNotFound", err)
		}
		if _, err := s.KnowledgeText(ctx, read); err != nil {
			t.Errorf("the text read 20 days ago: %v; want it kept", err)
		}
	})
}

// TestStoringATextAgainWritesOnlyWhenStale: storing a text stored and used
// within the hour only reads it (no write, no row lock for concurrent
// starts of the same spec); stored again later, it is marked used again,
// and the purge keeps it.
func TestStoringATextAgainWritesOnlyWhenStale(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		ctx := t.Context()
		hash, err := s.PutKnowledgeText(ctx, "stored by every onboarding of a spec")
		if err != nil {
			t.Fatal(err)
		}
		first := c.Now()
		c.Add(30 * time.Minute)
		if again, err := s.PutKnowledgeText(ctx, "stored by every onboarding of a spec"); err != nil || again != hash {
			t.Fatalf("stored again = %s, %v; want %s", again, err, hash)
		}
		if at, err := store.TextUsedAt(ctx, s, hash); err != nil || !at.Equal(first) {
			t.Errorf("used_at after storing again within the hour = %s, %v; want %s (unchanged)", at, err, first)
		}
		c.Add(20 * 24 * time.Hour)
		if _, err := s.PutKnowledgeText(ctx, "stored by every onboarding of a spec"); err != nil {
			t.Fatal(err)
		}
		if at, err := store.TextUsedAt(ctx, s, hash); err != nil || !at.Equal(c.Now()) {
			t.Errorf("used_at after storing again 20 days later = %s, %v; want %s", at, err, c.Now())
		}
		c.Add(20 * 24 * time.Hour)
		if n, err := s.PurgeKnowledgeTexts(ctx, c.Now().Add(-30*24*time.Hour)); err != nil || n != 0 {
			t.Errorf("purged %d texts (%v); want none: the text was stored again 20 days ago", n, err)
		}
	})
}

// TestReadingATextWritesOnlyWhenStale: an onboarding's read of a text used
// within the hour leaves used_at alone (one statement, no write); a read
// after that marks it used, and the purge keeps it.
func TestReadingATextWritesOnlyWhenStale(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		ctx := t.Context()
		hash, err := s.PutKnowledgeText(ctx, "read by every onboarding of a spec")
		if err != nil {
			t.Fatal(err)
		}
		first := c.Now()
		c.Add(30 * time.Minute)
		if got, err := s.KnowledgeText(ctx, hash); err != nil || got != "read by every onboarding of a spec" {
			t.Fatalf("KnowledgeText = %q, %v", got, err)
		}
		if at, err := store.TextUsedAt(ctx, s, hash); err != nil || !at.Equal(first) {
			t.Errorf("used_at after a read within the hour = %s, %v; want %s (unchanged)", at, err, first)
		}
		c.Add(20 * 24 * time.Hour)
		if got, err := s.KnowledgeText(ctx, hash); err != nil || got != "read by every onboarding of a spec" {
			t.Fatalf("KnowledgeText 20 days later = %q, %v", got, err)
		}
		if at, err := store.TextUsedAt(ctx, s, hash); err != nil || !at.Equal(c.Now()) {
			t.Errorf("used_at after a read 20 days later = %s, %v; want %s", at, err, c.Now())
		}
		c.Add(20 * 24 * time.Hour)
		if n, err := s.PurgeKnowledgeTexts(ctx, c.Now().Add(-30*24*time.Hour)); err != nil || n != 0 {
			t.Errorf("purged %d texts (%v); want none: the text was read 20 days ago", n, err)
		}
		if _, err := s.KnowledgeText(ctx, store.KnowledgeHash("never stored")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a text never stored: %v; want ErrNotFound", err)
		}
	})
}

// TestPutKnowledgeTexts stores many texts at once: their hashes in order
// (a text given twice, twice), a new text written, one stored within the
// hour left alone, a stale one marked used again.
func TestPutKnowledgeTexts(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		ctx := t.Context()
		recent, err := s.PutKnowledgeText(ctx, "stored a minute ago")
		if err != nil {
			t.Fatal(err)
		}
		stale, err := s.PutKnowledgeText(ctx, "stored two hours ago")
		if err != nil {
			t.Fatal(err)
		}
		c.Add(2 * time.Hour)
		if _, err := s.PutKnowledgeText(ctx, "stored a minute ago"); err != nil {
			t.Fatal(err)
		}
		recentAt := c.Now()
		c.Add(time.Minute)
		texts := []string{"new", "stored two hours ago", "stored a minute ago", "new"}
		got, err := s.PutKnowledgeTexts(ctx, texts)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{store.KnowledgeHash("new"), stale, recent, store.KnowledgeHash("new")}
		if !slices.Equal(got, want) {
			t.Fatalf("PutKnowledgeTexts = %v, want %v", got, want)
		}
		for _, tc := range []struct {
			hash string
			want time.Time
		}{{want[0], c.Now()}, {stale, c.Now()}, {recent, recentAt}} {
			if at, err := store.TextUsedAt(ctx, s, tc.hash); err != nil || !at.Equal(tc.want) {
				t.Errorf("used_at of %s = %s, %v; want %s", tc.hash[:8], at, err, tc.want)
			}
		}
		if text, err := s.KnowledgeText(ctx, want[0]); err != nil || text != "new" {
			t.Errorf("KnowledgeText(new) = %q, %v", text, err)
		}
		// More texts than one read looks up: every one stored, once.
		many := make([]string, 1001)
		for i := range many {
			many[i] = fmt.Sprintf("source %d of a large spec", i)
		}
		hashes, err := s.PutKnowledgeTexts(ctx, many)
		if err != nil || len(hashes) != len(many) {
			t.Fatalf("PutKnowledgeTexts(1001 texts) = %d hashes, %v", len(hashes), err)
		}
		for _, i := range []int{0, 499, 500, 1000} {
			if text, err := s.KnowledgeText(ctx, hashes[i]); err != nil || text != many[i] {
				t.Errorf("text %d = %q, %v; want %q", i, text, err, many[i])
			}
		}
		if got, err := s.PutKnowledgeTexts(ctx, nil); err != nil || len(got) != 0 {
			t.Errorf("PutKnowledgeTexts(nil) = %v, %v; want none", got, err)
		}
	})
}
