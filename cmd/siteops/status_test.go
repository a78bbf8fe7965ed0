package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

// TestStatusOfAShardedSiteNamesItsShard checks what siteops status says
// of a lead sync it does not find: where the site's events go with lead
// event shards, its shard by name when SITEOPS_LEAD_SHARDS is set, and
// still not found (exit 3); other IDs and other errors pass unchanged.
func TestStatusOfAShardedSiteNamesItsShard(t *testing.T) {
	notFound := fmt.Errorf("no workflow with ID lead-sync/site_7: %w", starter.ErrNotFound)
	shard := workflows.LeadEventsKind.ID(workflows.LeadShardKey("site_7", 16))
	for _, tc := range []struct {
		name, id, shards string
		err              error
		want             string // "" for err unchanged
	}{
		{"shards set", "lead-sync/site_7", "16", notFound, "siteops status " + shard},
		{"shards unset", "lead-sync/site_7", "", notFound, "siteops status lead-events/<k>"},
		{"shards not a number", "lead-sync/site_7", "many", notFound, "siteops status lead-events/<k>"},
		{"another kind", "onboarding/acme", "16", notFound, ""},
		{"another error", "lead-sync/site_7", "16", errors.New("unavailable"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := shardHint(tc.err, tc.id, tc.shards)
			if tc.want == "" {
				if !errors.Is(got, tc.err) || got.Error() != tc.err.Error() {
					t.Errorf("shardHint = %v, want the error unchanged", got)
				}
				return
			}
			if !strings.Contains(got.Error(), tc.want) || !strings.HasPrefix(got.Error(), tc.err.Error()) || !errors.Is(got, starter.ErrNotFound) {
				t.Errorf("shardHint = %q (not found: %v), want the error, then %q, still not found", got, errors.Is(got, starter.ErrNotFound), tc.want)
			}
		})
	}
}
