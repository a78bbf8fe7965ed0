package main

import (
	"fmt"
	"testing"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/doctor"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/wiring"
)

// TestExitCodesOfStartUpAndStoreErrors checks the codes of what doctor and
// the start-up checks report about the store and the secret key, however
// deeply they are wrapped.
func TestExitCodesOfStartUpAndStoreErrors(t *testing.T) {
	refused := &wiring.PreflightError{Process: "ingress", Result: doctor.Result{Check: "secret key", Status: doctor.Fail,
		Err: fmt.Errorf("1 of 1 stored secrets do not decrypt: %w", store.ErrKeyMismatch)}}
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"no database yet", fmt.Errorf("%w at sqlite:///x/siteops.db: start the worker", wiring.ErrNoStore), exitNotFound},
		{"a database not migrated", fmt.Errorf("schema version 3: %w", doctor.ErrNotMigrated), exitFailed},
		{"a key that cannot read the stored secrets", refused, exitAuth},
		{"a bad setting", config.Invalid("SITEOPS_LOG_FORMAT=%q: use text or json", "xml"), exitUsage},
		{"no secret key beside stored secrets", &wiring.PreflightError{Process: "ingress", Result: doctor.Result{Check: "secret key", Status: doctor.Fail,
			Err: fmt.Errorf("SITEOPS_SECRET_KEY is not set, and the store holds 1 active webhook secret(s): %w", store.ErrNoSecretKey)}}, exitUsage},
		{"a database that does not answer", fmt.Errorf("opening: %w", store.ErrUnreachable), exitUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitCode(tc.err); got != tc.want {
				t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}
