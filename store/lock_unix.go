//go:build unix

package store

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on path (created if needed), waiting
// for another process that holds it, and returns the function that
// releases it. The lock goes with the process if it dies.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600) //nolint:gosec // the path is the store's own, from SITEOPS_DATABASE_URL
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}
