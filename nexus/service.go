// Package nexus is siteops' Nexus service for partners: the handlers of the
// operations that package nexus/api names, which the siteops worker
// registers beside its workflows and activities. It lets the systems that
// onboard customers do so from any Temporal namespace (through a Nexus
// endpoint) or over plain HTTP, without the database: store knowledge
// texts, onboard, and read how an onboarding and a lead sync stand.
//
// The handlers add no behaviour of their own: they validate the input
// before anything starts, then start the same workflows, with the same
// derived workflow IDs and ID policies, through package starter.
// Knowledge texts go to the store, within a quota per caller; the
// workflows see only their hashes. Each caller has a limit of running
// onboardings too. A caller is the Nexus endpoint the server names, never
// what the request asserts (see Caller).
//
// Its answers cross to callers who do not hold SITEOPS_PAYLOAD_KEY, so
// their types (Plaintext) are written in plaintext, authenticated under the
// key, by a codec that is given them (codec.Options.Plaintext).
//
// What it deliberately leaves out: the on-call playbooks (embed off and on,
// secret rotation). Nothing in a Nexus request authenticates its caller to
// the handler — the frontend's HTTP API reaches a task queue's service
// without an endpoint, with any header — so whoever reaches the service
// would hold on-call's powers. The playbook operation names are refused
// here, and logged with the caller as the request names it; on-call runs
// them from the CLI with its own Temporal credentials.
package nexus

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	nexusrpc "github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporalnexus"

	"github.com/siteops/siteops/codec"
	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
)

// TextStore keeps knowledge texts by hash: *store.Store.
type TextStore interface {
	starter.TextStore
	PutKnowledgeTextAs(ctx context.Context, owner, text string, q store.TextQuota) (string, error)
	KnowledgeText(ctx context.Context, hash string) (string, error)
}

// Options are what the service runs on.
type Options struct {
	// Texts stores knowledge texts. Required.
	Texts TextStore
	// LeadSyncs is where lead-sync-status finds what the lead event
	// shards did for a site (the store); nil leaves them out.
	LeadSyncs starter.LeadSyncReader
	// TaskQueue is where the workflows start; the task queue of the worker
	// that handles the operation when empty.
	TaskQueue string
	// PayloadKey is SITEOPS_PAYLOAD_KEY when the worker's client encrypts
	// payloads with it: onboard reads the input of a slug's existing run
	// back from history to tell the same spec from a different one.
	PayloadKey string
	// Quota bounds the knowledge texts each identified caller keeps in
	// the store (store-knowledge and onboard's inline texts), PerOwner,
	// and every caller's together, Total; zero is no limit.
	Quota store.TextQuota
	// SharedTextQuota bounds the texts that every request without an
	// endpoint the server names keeps, together (see Caller);
	// Quota.PerOwner when zero.
	SharedTextQuota int64
	// MaxRunning bounds the onboardings each identified caller has
	// running; zero is no limit (and the onboardings carry no
	// SiteopsCaller search attribute).
	MaxRunning int
	// SharedMaxRunning bounds those of every request without an endpoint
	// the server names, together; MaxRunning when zero.
	SharedMaxRunning int
	// Logger logs refused requests with their caller; slog.Default when
	// nil.
	Logger *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// withDefaults fills in what Options leaves to New.
func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SharedTextQuota == 0 {
		o.SharedTextQuota = o.Quota.PerOwner
	}
	if o.SharedMaxRunning == 0 {
		o.SharedMaxRunning = o.MaxRunning
	}
	return o
}

// Service handles the operations of package nexus/api.
type Service struct {
	o       Options
	dc      converter.DataConverter
	running *running
}

// New builds the handlers.
func New(o Options) (*Service, error) {
	if o.Texts == nil {
		return nil, fmt.Errorf("nexus: the service needs the store (Options.Texts) for knowledge texts")
	}
	if o.Quota.PerOwner < 0 || o.Quota.Total < 0 || o.SharedTextQuota < 0 || o.MaxRunning < 0 || o.SharedMaxRunning < 0 {
		return nil, fmt.Errorf("nexus: quotas and limits are zero (none) or more")
	}
	o = o.withDefaults()
	s := &Service{o: o, running: newRunning(o.Now)}
	if o.PayloadKey != "" {
		keys, err := codec.ParseKeyRing(o.PayloadKey)
		if err != nil {
			return nil, err
		}
		c, err := codec.New(codec.Options{Keys: keys})
		if err != nil {
			return nil, err
		}
		s.dc = c.DataConverter()
	}
	return s, nil
}

// NexusService returns the Nexus service to register on a worker
// (worker.RegisterNexus): the partners' operations, and a refusal for each
// of the on-call playbooks' names.
func (s *Service) NexusService() (*nexusrpc.Service, error) {
	svc := nexusrpc.NewService(api.ServiceName)
	onboard, err := temporalnexus.NewTemporalOperation(temporalnexus.TemporalOperationOptions[api.OnboardInput, api.OnboardResult]{
		Name: api.OnboardName, Start: s.onboard,
	})
	if err != nil {
		return nil, err
	}
	ops := []nexusrpc.RegisterableOperation{
		nexusrpc.NewSyncOperation(api.StoreKnowledgeName, s.storeKnowledge),
		onboard,
		nexusrpc.NewSyncOperation(api.OnboardingStatusName, s.onboardingStatus),
		nexusrpc.NewSyncOperation(api.LeadSyncStatusName, s.leadSyncStatus),
	}
	for _, name := range api.NotServed {
		ops = append(ops, nexusrpc.NewSyncOperation(name, s.notServed(name)))
	}
	if err := svc.Register(ops...); err != nil {
		return nil, err
	}
	return svc, nil
}

// starter is the starter library over the client of the worker that
// handles the operation, in its namespace.
func (s *Service) starter(ctx context.Context) *starter.Starter {
	info := temporalnexus.GetOperationInfo(ctx)
	tq := s.o.TaskQueue
	if tq == "" {
		tq = info.TaskQueue
	}
	return starter.New(starter.Options{
		Client: temporalnexus.GetClient(ctx), Texts: s.o.Texts, LeadSyncs: s.o.LeadSyncs, TaskQueue: tq,
		Namespace: info.Namespace, DataConverter: s.dc,
	})
}
