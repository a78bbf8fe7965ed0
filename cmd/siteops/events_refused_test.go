package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/inbox"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/wiring"
)

// TestEventsListRefused lists the record of refused deliveries with
// `events list --refused`: newest minute first, as JSON and as a table,
// narrowed by receiver (the default one by its shown name), reason, time
// and limit; and refuses the inbox's filters with it, and its own
// without it, as usage errors.
func TestEventsListRefused(t *testing.T) {
	url := "sqlite://" + t.TempDir() + "/siteops.db"
	st, _, err := wiring.OpenStore(t.Context(), config.Database{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	recent := time.Now().UTC().Truncate(time.Minute)
	old := recent.Add(-2 * time.Hour)
	if err := st.RecordRefusals(t.Context(), []store.RefusedDelivery{
		{Minute: old, Receiver: "v2", Reason: "invalid_signature", Status: 401, Count: 9, FirstAt: old.Add(time.Second), LastAt: old.Add(50 * time.Second)},
		{Minute: recent, Receiver: "v2", Reason: "invalid_signature", Status: 401, Count: 3, FirstAt: recent, LastAt: recent.Add(2 * time.Second)},
		{Minute: recent, Receiver: "", Reason: "store_unavailable", Status: 503, Count: 1, FirstAt: recent.Add(3 * time.Second), LastAt: recent.Add(3 * time.Second),
			EventID: "evt_lost", EventType: "lead.created"},
		{Minute: recent, Receiver: "retired", Reason: "unknown_receiver", Status: 401, Count: 5, FirstAt: recent, LastAt: recent.Add(time.Second)},
	}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SITEOPS_DATABASE_URL", url)

	list := func(args ...string) inbox.RefusedList {
		t.Helper()
		out, err := runCLI(t, "", append([]string{"events", "list", "--refused", "-o", "json"}, args...)...)
		if err != nil {
			t.Fatalf("events list --refused %v: %v", args, err)
		}
		var l inbox.RefusedList
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("events list --refused %v printed %s (%v)", args, out, err)
		}
		return l
	}
	keys := func(l inbox.RefusedList) string {
		var ks []string
		for _, r := range l.Refused {
			ks = append(ks, r.Receiver+"/"+r.Reason)
		}
		return strings.Join(ks, " ")
	}
	all := list()
	if got, want := keys(all), "default/store_unavailable v2/invalid_signature retired/unknown_receiver v2/invalid_signature"; got != want || all.MoreMatched {
		t.Errorf("events list --refused: %s (more %v); want %s, newest minute and latest refusal first", got, all.MoreMatched, want)
	}
	if r := all.Refused[0]; r.EventID != "evt_lost" || r.EventType != "lead.created" || r.Status != 503 || r.Count != 1 || !r.Minute.Equal(recent) {
		t.Errorf("the verified refusal: %+v", r)
	}
	for _, tc := range []struct {
		args []string
		want string
		more bool
	}{
		{[]string{"--receiver", "v2"}, "v2/invalid_signature v2/invalid_signature", false},
		{[]string{"--receiver", "default"}, "default/store_unavailable", false},
		{[]string{"--reason", "unknown_receiver"}, "retired/unknown_receiver", false},
		{[]string{"--since", "1h"}, "default/store_unavailable v2/invalid_signature retired/unknown_receiver", false},
		{[]string{"--limit", "1"}, "default/store_unavailable", true},
		{[]string{"--receiver", "nobody"}, "", false},
	} {
		if l := list(tc.args...); keys(l) != tc.want || l.MoreMatched != tc.more {
			t.Errorf("events list --refused %v: %q (more %v); want %q (more %v)", tc.args, keys(l), l.MoreMatched, tc.want, tc.more)
		}
	}

	out, err := runCLI(t, "", "events", "list", "--refused", "--receiver", "v2", "--since", "1h")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"MINUTE", "RECEIVER", "REASON", "STATUS", "COUNT", recent.Format("2006-01-02T15:04Z07:00"), "v2", "invalid_signature", "401", "never recorded in the inbox"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table does not show %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "retired") || strings.Count(out, "invalid_signature") != 1 {
		t.Errorf("--receiver v2 --since 1h shows other rows:\n%s", out)
	}
	if out, err := runCLI(t, "", "events", "list", "--refused", "--receiver", "nobody"); err != nil || !strings.Contains(out, "no refused deliveries match") {
		t.Errorf("an empty listing: %v\n%s", err, out)
	}

	for _, args := range [][]string{
		{"--refused", "--type", "lead.created"},
		{"--refused", "--outcome", "dead"},
		{"--refused", "--pending"},
		{"--refused", "--page", "x"},
		{"--receiver", "v2"},
		{"--reason", "busy"},
		{"--refused", "--reason", "forged"},
		{"--refused", "--limit", "0"},
		{"--refused", "--since", "yesterday"},
	} {
		_, err := runCLI(t, "", append([]string{"events", "list"}, args...)...)
		var usage usageError
		if !errors.As(err, &usage) {
			t.Errorf("events list %v: %v; want a usage error", args, err)
		}
	}
}
