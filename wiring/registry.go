package wiring

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/siteops/siteops/release"
	"github.com/siteops/siteops/store"
)

// register records a worker or an ingress of this release in the store's
// process registry and keeps it there, heartbeating, until the returned
// stop is called, which removes it. `siteops release finalize` reads the
// registry to tell whether a process of an older release still uses the
// store. A registry the store cannot write to is logged, never fatal: the
// process serves all the same.
func register(ctx context.Context, st *store.Store, role, buildID string, logger *slog.Logger) (stop func()) {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	p := store.Process{
		ID: fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:])), Role: role,
		Release: release.Number, BuildID: buildID, Host: host, StartedAt: time.Now(), MaxConns: st.MaxConns(),
	}
	failing := false
	beat := func(ctx context.Context) {
		err := st.Heartbeat(ctx, p)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			logger.Warn("recording this process in the store's process registry failed; siteops release finalize may not see it (retried every 30 s)", "error", err)
		case err == nil && failing:
			failing = false
			logger.Info("this process is recorded in the store's process registry again")
		}
	}
	beat(ctx)
	logger.Info("registered in the store's process registry", "process", p.ID, "role", role, "release", release.Number, "build_id", buildID)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(store.ProcessHeartbeat)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				beat(ctx)
				_, _ = st.ForgetProcesses(ctx, time.Now().Add(-store.ProcessForgotten))
			}
		}
	}()
	return func() {
		cancel()
		<-done
		dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer dcancel()
		_ = st.Deregister(dctx, p.ID)
	}
}
