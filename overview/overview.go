// Package overview is on-call's view of everything open in siteops at
// once: the embed incidents and secret rotations in flight, the webhook
// endpoints that fail or are disabled, the lead syncs that lag or failed,
// the sites the lead sweep cannot read, the inbox's dead letters and its
// oldest pending event, the deliveries the ingress refused in the last
// hour — each with the command to run next — and the lists behind them
// (`siteops overview`, `siteops embed list`, `siteops secret list`,
// `siteops leads list`).
//
// It only reads: Temporal's visibility and the workflows' status queries,
// the store, and the API's list of endpoints. A part it cannot read
// (Temporal down, no store, no API key) is reported as unavailable, with
// why, and the rest is still shown: the view on-call needs most is the one
// taken while something is broken.
//
// What it leaves out: changing anything, and counting what visibility
// cannot list quickly (the lead syncs that lag come from the store's
// record of each sync's last page, not from a query of every workflow).
package overview

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
)

// Defaults of Options.
const (
	DefaultLimit        = 20
	DefaultLagAfter     = 90 * time.Minute
	DefaultQueryTimeout = 3 * time.Second
	// queriesAtOnce bounds the status queries sent together.
	queriesAtOnce = 8
)

// Options are what an overview reads. Every source is optional: a missing
// one makes its parts unavailable, with the reason given.
type Options struct {
	// Temporal is a client of siteops' namespace; Starter reads workflow
	// statuses through it (failures, results).
	Temporal  client.Client
	Namespace string
	Starter   *starter.Starter
	// NoTemporal says why Temporal is not there, when Temporal is nil.
	NoTemporal string
	// DataConverter reads memos (the payload codec's, when one is used).
	DataConverter converter.DataConverter
	Store         *store.Store
	NoStore       string
	// Endpoints lists the account's webhook endpoints (the API);
	// NoEndpoints says why it cannot, when it is nil.
	Endpoints   func(ctx context.Context) ([]agentsite.WebhookEndpoint, error)
	NoEndpoints string
	// Limit bounds each list (DefaultLimit).
	Limit int
	// LagAfter is how long since its last page, or the lead sweep's last
	// check that found it current, a running lead sync lags
	// (DefaultLagAfter: the sweep's default period and half again).
	LagAfter time.Duration
	// QueryTimeout bounds each status query (DefaultQueryTimeout): a query
	// needs a worker, and none answering must not hold the view.
	QueryTimeout time.Duration
	Now          func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Limit <= 0 {
		o.Limit = DefaultLimit
	}
	if o.LagAfter <= 0 {
		o.LagAfter = DefaultLagAfter
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = DefaultQueryTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.DataConverter == nil {
		o.DataConverter = converter.GetDefaultDataConverter()
	}
	if o.Temporal == nil && o.NoTemporal == "" {
		o.NoTemporal = "no Temporal connection"
	}
	if o.Store == nil && o.NoStore == "" {
		o.NoStore = "no store"
	}
	if o.Endpoints == nil && o.NoEndpoints == "" {
		o.NoEndpoints = "AGENTSITE_BASE_URL and AGENTSITE_API_KEY are not set"
	}
	return o
}

// Report is everything open at one time.
type Report struct {
	At        time.Time  `json:"at"`
	Incidents []Incident `json:"incidents"`
	Rotations []Rotation `json:"rotations"`
	// Endpoints are the account's webhook endpoints that are not enabled
	// or whose last delivery failed.
	Endpoints []Endpoint `json:"endpoints"`
	LeadSyncs LeadSyncs  `json:"lead_syncs"`
	Inbox     *Inbox     `json:"inbox,omitempty"`
	// Refused sums the deliveries the ingress refused in the last hour,
	// by receiver and reason, the most refused first.
	Refused []Refused `json:"refused_deliveries"`
	// Unavailable lists the parts that could not be read, and why.
	Unavailable []Unavailable `json:"unavailable,omitempty"`
}

// Unavailable is a part of the report that could not be read.
type Unavailable struct {
	Part   string `json:"part"`
	Reason string `json:"reason"`
}

// Clear reports whether nothing is open, failing or unread.
func (r Report) Clear() bool {
	return len(r.Incidents) == 0 && len(r.Rotations) == 0 && len(r.Endpoints) == 0 &&
		len(r.LeadSyncs.Lagging) == 0 && len(r.LeadSyncs.Failed) == 0 && len(r.LeadSyncs.SweepFailing) == 0 && len(r.Refused) == 0 &&
		(r.Inbox == nil || (r.Inbox.Dead == 0 && !r.Inbox.Behind)) && len(r.Unavailable) == 0
}

// Gather reads everything open, the parts side by side.
func Gather(ctx context.Context, o Options) Report {
	o = o.withDefaults()
	r := Report{At: o.Now().UTC(), Incidents: []Incident{}, Rotations: []Rotation{}, Endpoints: []Endpoint{}, Refused: []Refused{}}
	var mu sync.Mutex
	unavailable := func(part string, err error) {
		mu.Lock()
		defer mu.Unlock()
		r.Unavailable = append(r.Unavailable, Unavailable{Part: part, Reason: oneLine(err)})
	}
	var wg sync.WaitGroup
	if o.Temporal == nil {
		for _, part := range []string{"incidents", "rotations", "lead syncs"} {
			r.Unavailable = append(r.Unavailable, Unavailable{Part: part, Reason: o.NoTemporal})
		}
	} else {
		wg.Go(func() {
			l, err := ListIncidents(ctx, o, IncidentFilter{})
			if err != nil {
				unavailable("incidents", err)
				return
			}
			mu.Lock()
			r.Incidents = l
			mu.Unlock()
		})
		wg.Go(func() {
			l, err := ListRotations(ctx, o)
			if err != nil {
				unavailable("rotations", err)
				return
			}
			mu.Lock()
			r.Rotations = l
			mu.Unlock()
		})
	}
	wg.Go(func() {
		ls, problems := LeadSyncStatus(ctx, o)
		mu.Lock()
		r.LeadSyncs = ls
		mu.Unlock()
		for _, p := range problems {
			unavailable(p.Part, fmt.Errorf("%s", p.Reason))
		}
	})
	if o.Store == nil {
		r.Unavailable = append(r.Unavailable, Unavailable{Part: "inbox", Reason: o.NoStore}, Unavailable{Part: "refused deliveries", Reason: o.NoStore})
	} else {
		wg.Go(func() {
			l, err := refused(ctx, o)
			if err != nil {
				unavailable("refused deliveries", err)
				return
			}
			mu.Lock()
			r.Refused = l
			mu.Unlock()
		})
		wg.Go(func() {
			in, err := inbox(ctx, o)
			if err != nil {
				unavailable("inbox", err)
				return
			}
			mu.Lock()
			r.Inbox = &in
			mu.Unlock()
		})
	}
	if o.Endpoints == nil {
		r.Unavailable = append(r.Unavailable, Unavailable{Part: "endpoints", Reason: o.NoEndpoints})
	} else {
		wg.Go(func() {
			l, err := failingEndpoints(ctx, o)
			if err != nil {
				unavailable("endpoints", err)
				return
			}
			mu.Lock()
			r.Endpoints = l
			mu.Unlock()
		})
	}
	wg.Wait()
	return r
}

// each runs f on every item of in, at most queriesAtOnce at a time.
func each[T any](in []T, f func(i int, t T)) {
	sem := make(chan struct{}, queriesAtOnce)
	var wg sync.WaitGroup
	for i, t := range in {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i, t)
		})
	}
	wg.Wait()
}

func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}

// quote is a visibility query's string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
