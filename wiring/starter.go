package wiring

import (
	"context"
	"log/slog"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
)

// Starter dials Temporal and, when db is given, opens the store for
// knowledge texts, and returns a starter over them and the function that
// closes them. The store must exist (OpenExistingStore): texts written to
// a store that no worker reads would fail the onboarding later, so it is
// refused before anything starts.
func Starter(ctx context.Context, t config.Temporal, db *config.Database, logger *slog.Logger) (*starter.Starter, func(), error) {
	return starterWith(ctx, t, db, logger, starter.Options{})
}

// starterWith is Starter with the starter's other options (warnings,
// receiver policy, patience) given: what it dials and opens fills in the
// rest.
func starterWith(ctx context.Context, t config.Temporal, db *config.Database, logger *slog.Logger, so starter.Options) (*starter.Starter, func(), error) {
	o, conn, err := TemporalOptions(t, logger, nil)
	if err != nil {
		return nil, nil, err
	}
	if so.Patience > 0 {
		// A call that gets no answer ends before the caller's deadline,
		// so that Patiently can tell the two apart (starter.TryTimeout).
		o.RPCTimeout = starter.TryTimeout(so.Patience)
	}
	var closers []func()
	closeAll := func() {
		for _, f := range closers {
			f()
		}
	}
	var texts *store.Store
	if db != nil {
		if texts, _, err = OpenExistingStore(ctx, *db); err != nil {
			return nil, nil, err
		}
		closers = append(closers, func() { _ = texts.Close() })
	}
	c, err := Dial(ctx, o, conn)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	closers = append(closers, c.Close)
	so.Client, so.TaskQueue, so.Namespace, so.DataConverter = c, t.TaskQueue, conn.Namespace, o.DataConverter
	if texts != nil {
		so.Texts, so.LeadSyncs = texts, texts
	}
	return starter.New(so), closeAll, nil
}
