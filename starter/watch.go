package starter

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/siteops/siteops/workflows"
)

// Phase is where a running workflow stands, as a wait shows it to the
// person waiting.
type Phase struct {
	// Key changes when the workflow moves on: its status query's summary
	// changed, an activity started being retried, no worker answers.
	Key string
	// Line says it in one line, the workflow ID first.
	Line string
}

// watchAsk bounds each question WatchPhases asks.
const watchAsk = 3 * time.Second

// WatchPhases asks the workflow workflowID where it stands every interval
// until ctx ends, and calls report each time that changes: the first
// line of its status query's summary, and the activity it is retrying
// with the attempt and the last failure. It reads what Status reads, but
// once, without retrying while Temporal is unavailable and without
// warnings: the wait it accompanies decides how the command ends, so a
// question that finds no answer is skipped. A workflow that does not exist
// yet (an update-with-start on its way) or has closed reports nothing.
func (s *Starter) WatchPhases(ctx context.Context, workflowID string, interval time.Duration, report func(Phase)) {
	k, ok := workflows.KindOf(workflowID)
	if !ok {
		return
	}
	w := watcher{s: s, id: workflowID, kind: k, began: time.Now()}
	var last Phase
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if ph, ok := w.phase(ctx); ok && ph != last {
			last = ph
			report(ph)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watcher is one WatchPhases.
type watcher struct {
	s     *Starter
	id    string
	kind  workflows.Kind
	began time.Time
	// answered says the status query has answered once: from then on a
	// query without an answer is a blip, asked again at the next interval.
	answered bool
}

// noWorkerAfter is how long a running workflow's status query goes
// unanswered before WatchPhases says that no worker seems to run it.
const noWorkerAfter = 5 * time.Second

// phase asks once where the running workflow stands.
func (w *watcher) phase(parent context.Context) (Phase, bool) {
	ctx, cancel := context.WithTimeout(parent, watchAsk)
	defer cancel()
	st, err := w.s.describe(ctx, w.id)
	if err != nil || st.Status != "Running" {
		return Phase{}, false
	}
	var key, line string
	v, err := w.s.o.Client.QueryWorkflow(ctx, w.id, st.RunID, w.kind.StatusQuery)
	detail := w.kind.NewStatus()
	switch {
	case err == nil && v.Get(detail) == nil:
		w.answered = true
		if sum := detail.Summary(); len(sum) > 0 {
			key, line = sum[0], sum[0]
		}
	case w.answered || parent.Err() != nil || time.Since(w.began) < noWorkerAfter:
		return Phase{}, false
	default:
		key, line = "no-answer", fmt.Sprintf("no worker has answered its status query yet: is a siteops worker running on task queue %s?", st.TaskQueue)
	}
	for _, p := range st.Pending {
		if p.Attempt <= 1 && p.LastFailure == nil {
			continue
		}
		key += " retrying " + p.Activity
		line += fmt.Sprintf("; retrying %s (attempt %d", p.Activity, p.Attempt)
		if p.LastFailure != nil {
			line += ": " + p.LastFailure.String()
		}
		line += ")"
	}
	return Phase{Key: key, Line: w.id + ": " + strings.Join(strings.Fields(line), " ")}, true
}
