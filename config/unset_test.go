package config

import (
	"os"
	"testing"
)

// unset removes v for the rest of the test and restores it afterwards.
func unset(t *testing.T, v string) {
	t.Helper()
	old, had := os.LookupEnv(v)
	_ = os.Unsetenv(v)
	t.Cleanup(func() {
		if had {
			_ = os.Setenv(v, old)
		}
	})
}
