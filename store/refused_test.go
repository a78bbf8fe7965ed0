package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// TestRefusedDeliveriesMerge checks the record of refused deliveries on
// both dialects: rows of one minute, receiver and reason from two
// ingresses (two writes) become one row whose count is their sum, whose
// first and last refusal are the earliest and the latest, and which keeps
// the event of the latest verified refusal; other keys stay apart; the
// listing is newest minute first and filters by receiver (the default
// one by its shown name), reason and time; the summary sums by receiver
// and reason.
func TestRefusedDeliveriesMerge(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		m0 := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
		at := func(min, sec, ms int) time.Time {
			return m0.Add(time.Duration(min)*time.Minute + time.Duration(sec)*time.Second + time.Duration(ms)*time.Millisecond)
		}
		row := func(min int, receiver, reason string, status int, count int64, first, last time.Time, id, typ string) store.RefusedDelivery {
			return store.RefusedDelivery{Minute: m0.Add(time.Duration(min) * time.Minute), Receiver: receiver, Reason: reason, Status: status,
				Count: count, FirstAt: first, LastAt: last, EventID: id, EventType: typ}
		}
		// Ingress A, then ingress B, which refused the first one earlier
		// and the last one later; only A's write has a verified event.
		if err := s.RecordRefusals(ctx, []store.RefusedDelivery{
			row(0, "v2", "invalid_signature", 401, 3, at(0, 10, 0), at(0, 20, 0), "", ""),
			row(0, "v2", "store_unavailable", 503, 1, at(0, 15, 0), at(0, 15, 0), "evt_verified", "lead.created"),
			row(0, "", "timestamp_outside_window", 401, 2, at(0, 1, 0), at(0, 2, 0), "", ""),
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordRefusals(ctx, []store.RefusedDelivery{
			row(0, "v2", "invalid_signature", 401, 4, at(0, 5, 500), at(0, 59, 999), "", ""),
			row(0, "v2", "store_unavailable", 503, 2, at(0, 30, 0), at(0, 31, 0), "", ""),
			row(1, "v2", "invalid_signature", 401, 1, at(1, 0, 0), at(1, 0, 0), "", ""),
			row(1, "nobody", "unknown_receiver", 401, 7, at(1, 3, 0), at(1, 40, 0), "", ""),
		}); err != nil {
			t.Fatal(err)
		}
		all, err := s.RefusedDeliveries(ctx, store.RefusedFilter{})
		if err != nil {
			t.Fatal(err)
		}
		want := []store.RefusedDelivery{
			row(1, "nobody", "unknown_receiver", 401, 7, at(1, 3, 0), at(1, 40, 0), "", ""),
			row(1, "v2", "invalid_signature", 401, 1, at(1, 0, 0), at(1, 0, 0), "", ""),
			row(0, "v2", "invalid_signature", 401, 7, at(0, 5, 500), at(0, 59, 999), "", ""),
			row(0, "v2", "store_unavailable", 503, 3, at(0, 15, 0), at(0, 31, 0), "evt_verified", "lead.created"),
			row(0, "", "timestamp_outside_window", 401, 2, at(0, 1, 0), at(0, 2, 0), "", ""),
		}
		if fmt.Sprint(all) != fmt.Sprint(want) {
			t.Errorf("the record:\n got %v\nwant %v", all, want)
		}
		for _, tc := range []struct {
			name string
			f    store.RefusedFilter
			want int
		}{
			{"receiver", store.RefusedFilter{Receiver: "v2"}, 3},
			{"the default receiver by its shown name", store.RefusedFilter{Receiver: "default"}, 1},
			{"reason", store.RefusedFilter{Reason: "invalid_signature"}, 2},
			{"since within a minute", store.RefusedFilter{Since: at(1, 30, 0)}, 2},
			{"limit", store.RefusedFilter{Limit: 1}, 1},
			{"nothing", store.RefusedFilter{Receiver: "v3"}, 0},
		} {
			got, err := s.RefusedDeliveries(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want {
				t.Errorf("%s: %d rows, want %d: %v", tc.name, len(got), tc.want, got)
			}
		}
		sum, err := s.RefusalSummary(ctx, m0)
		if err != nil {
			t.Fatal(err)
		}
		wantSum := []store.RefusalTotal{
			{Receiver: "v2", Reason: "invalid_signature", Status: 401, Count: 8, FirstAt: at(0, 5, 500), LastAt: at(1, 0, 0)},
			{Receiver: "nobody", Reason: "unknown_receiver", Status: 401, Count: 7, FirstAt: at(1, 3, 0), LastAt: at(1, 40, 0)},
			{Receiver: "v2", Reason: "store_unavailable", Status: 503, Count: 3, FirstAt: at(0, 15, 0), LastAt: at(0, 31, 0)},
			{Receiver: "", Reason: "timestamp_outside_window", Status: 401, Count: 2, FirstAt: at(0, 1, 0), LastAt: at(0, 2, 0)},
		}
		if fmt.Sprint(sum) != fmt.Sprint(wantSum) {
			t.Errorf("the summary:\n got %v\nwant %v", sum, wantSum)
		}
		if sum, err = s.RefusalSummary(ctx, at(1, 0, 0)); err != nil || len(sum) != 2 {
			t.Errorf("the summary since the second minute: %v, %v; want its 2 keys", sum, err)
		}
	})
}

// TestPruneRefusals checks that the record is cut to its age and then to
// its size, the oldest rows first, on both dialects.
func TestPruneRefusals(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		m0 := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
		var rows []store.RefusedDelivery
		for i := range 10 {
			for _, reason := range []string{"invalid_signature", "unknown_receiver"} {
				at := m0.Add(time.Duration(i) * time.Minute)
				rows = append(rows, store.RefusedDelivery{Minute: at, Receiver: "v2", Reason: reason, Status: 401, Count: 1, FirstAt: at, LastAt: at})
			}
		}
		if err := s.RecordRefusals(ctx, rows); err != nil {
			t.Fatal(err)
		}
		// Minutes 0 and 1 are past the age; then 7 rows of the 16 left.
		n, err := s.PruneRefusals(ctx, m0.Add(2*time.Minute+30*time.Second), 7)
		if err != nil {
			t.Fatal(err)
		}
		if n != 13 {
			t.Errorf("pruned %d rows, want 13", n)
		}
		left, err := s.RefusedDeliveries(ctx, store.RefusedFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 7 || !left[0].Minute.Equal(m0.Add(9*time.Minute)) || !left[6].Minute.Equal(m0.Add(6*time.Minute)) {
			t.Errorf("left %v; want the newest 7 rows, minutes 9 to 6", left)
		}
		if n, err := s.PruneRefusals(ctx, m0, 0); err != nil || n != 0 {
			t.Errorf("a prune with nothing past its bounds removed %d (%v)", n, err)
		}
	})
}

// TestPruneRefusalsKeepsTheListedReceivers floods the record with newer
// rows of made-up receiver names, more than its size bound, and checks on
// both dialects that the size prune removes them first: the listed
// receivers' older rows stay, and only when they alone pass the bound are
// the oldest of them pruned. A row written listed by one ingress stays
// listed when another writes it unlisted.
func TestPruneRefusalsKeepsTheListedReceivers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		m0 := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
		row := func(min int, receiver, reason string, listed bool) store.RefusedDelivery {
			at := m0.Add(time.Duration(min) * time.Minute)
			return store.RefusedDelivery{Minute: at, Receiver: receiver, Reason: reason, Status: 401, Count: 1, FirstAt: at, LastAt: at, Listed: listed}
		}
		real := []store.RefusedDelivery{
			row(0, "v2", "invalid_signature", true),
			row(0, "", "timestamp_outside_window", true),
			row(1, "v2", "invalid_signature", true),
		}
		if err := s.RecordRefusals(ctx, real); err != nil {
			t.Fatal(err)
		}
		// The same key from an ingress whose list does not hold v2 yet.
		if err := s.RecordRefusals(ctx, []store.RefusedDelivery{row(1, "v2", "invalid_signature", false)}); err != nil {
			t.Fatal(err)
		}
		const maxRows = 20
		var flood []store.RefusedDelivery
		for min := 2; min < 12; min++ {
			for i := range 16 {
				for _, reason := range []string{"unknown_receiver", "timestamp_outside_window"} {
					flood = append(flood, row(min, fmt.Sprintf("made-up-%02d", i), reason, false))
				}
			}
		}
		if err := s.RecordRefusals(ctx, flood); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PruneRefusals(ctx, m0, maxRows); err != nil {
			t.Fatal(err)
		}
		left, err := s.RefusedDeliveries(ctx, store.RefusedFilter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != maxRows {
			t.Errorf("%d rows left; want the bound, %d", len(left), maxRows)
		}
		var listed []string
		for _, r := range left {
			if r.Listed {
				listed = append(listed, fmt.Sprintf("%d %q %s count %d", int(r.Minute.Sub(m0).Minutes()), r.Receiver, r.Reason, r.Count))
			} else if !r.Minute.Equal(m0.Add(11 * time.Minute)) {
				t.Errorf("a made-up name's row of minute %s stayed; want only the newest made-up rows", r.Minute)
			}
		}
		want := []string{`1 "v2" invalid_signature count 2`, `0 "" timestamp_outside_window count 1`, `0 "v2" invalid_signature count 1`}
		if fmt.Sprint(listed) != fmt.Sprint(want) {
			t.Errorf("the listed receivers' rows after the flood:\n got %v\nwant %v", listed, want)
		}
		// The listed rows alone past the bound: the oldest go.
		if _, err := s.PruneRefusals(ctx, m0, 2); err != nil {
			t.Fatal(err)
		}
		left, err = s.RefusedDeliveries(ctx, store.RefusedFilter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 2 || !left[0].Listed || !left[1].Listed || !left[1].Minute.Equal(m0) || left[1].Receiver != "v2" {
			t.Errorf("a bound of 2 left %+v; want the newest 2 listed rows", left)
		}
	})
}
