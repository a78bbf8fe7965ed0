package agentsite

import (
	"context"
	"fmt"
)

// Class is how urgent a call to the API is when the key's rate runs out:
// a Limiter grants its next token to the most urgent class waiting. The
// values are Temporal priority keys (1 is first, 5 last, 3 the default),
// so that a workflow's priority and its calls' class are one number: the
// catalogue of package workflows starts each kind of workflow with its
// class as priority key, and the activities carry the kind's class to the
// client, read by workflow type.
type Class int

// The classes siteops uses, first to last.
const (
	// ClassPlaybook is on-call's playbooks: an embed incident's PATCH, a
	// rotation's endpoint calls and its check for deliveries. It takes the
	// next token the limiter grants, whatever else waits.
	ClassPlaybook Class = 1
	// ClassOnboarding is an onboarding's own steps: creating the site,
	// configuring the agent, publishing; also the default of a call that
	// names no class.
	ClassOnboarding Class = 3
	// ClassBulk is the calls that come in numbers: knowledge and FAQ
	// uploads, lead pages, reconciliation.
	ClassBulk Class = 5
)

// Valid reports whether c is a Temporal priority key from 1 to 5.
func (c Class) Valid() bool { return c >= ClassPlaybook && c <= ClassBulk }

// String names the class for logs and metrics.
func (c Class) String() string {
	switch c {
	case ClassPlaybook:
		return "playbook"
	case ClassOnboarding:
		return "onboarding"
	case ClassBulk:
		return "bulk"
	}
	return fmt.Sprintf("class-%d", int(c))
}

// Priority is where a call stands when the key's rate runs out: its class,
// and within the class the caller whose share it spends (Key: a partner,
// a site). Callers of one class take turns by key, so that one caller's
// five hundred uploads do not hold another's first one behind them.
type Priority struct {
	Class Class
	Key   string
}

type priorityKey struct{}

// WithPriority returns a context whose calls wait in the limiter as p. A
// class outside 1 to 5 is taken as ClassOnboarding.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityFrom returns the priority WithPriority put in ctx: ClassOnboarding
// with no key when there is none.
func PriorityFrom(ctx context.Context) Priority {
	p, _ := ctx.Value(priorityKey{}).(Priority)
	if !p.Class.Valid() {
		p.Class = ClassOnboarding
	}
	return p
}
