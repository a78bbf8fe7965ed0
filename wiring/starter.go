package wiring

import (
	"context"
	"log/slog"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/starter"
)

// Starter dials Temporal and, when db is given, opens the store for
// knowledge texts, and returns a starter over them and the function that
// closes them.
func Starter(ctx context.Context, t config.Temporal, db *config.Database, logger *slog.Logger) (*starter.Starter, func(), error) {
	o, conn, err := TemporalOptions(t, logger, nil)
	if err != nil {
		return nil, nil, err
	}
	c, err := Dial(ctx, o, conn)
	if err != nil {
		return nil, nil, err
	}
	s := &starter.Starter{Client: c, TaskQueue: t.TaskQueue, Namespace: conn.Namespace, DataConverter: o.DataConverter}
	closers := []func(){c.Close}
	if db != nil {
		st, _, err := OpenStore(ctx, *db)
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		s.Texts = st
		closers = append(closers, func() { _ = st.Close() })
	}
	return s, func() {
		for _, f := range closers {
			f()
		}
	}, nil
}
