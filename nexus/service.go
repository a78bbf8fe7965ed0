// Package nexus is siteops' Nexus service: the handlers of the operations
// that package nexus/api names, which the siteops worker registers beside
// its workflows and activities. It lets systems that are not the siteops
// CLI onboard customers and run the playbooks from any Temporal namespace
// (through a Nexus endpoint) or over plain HTTP, without the database.
//
// The handlers add no behaviour of their own: they validate the input
// before anything starts, then start or drive the same workflows, with the
// same derived workflow IDs and ID policies, through package starter where
// it fits. Knowledge texts go to the store (store-knowledge, or onboard's
// inline texts); the workflows see only their hashes. What the package
// deliberately leaves out: callers' authentication, which belongs to the
// Nexus endpoint and the namespace.
package nexus

import (
	"context"
	"fmt"

	nexusrpc "github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporalnexus"

	"github.com/siteops/siteops/codec"
	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/starter"
)

// TextStore keeps knowledge texts by hash: *store.Store.
type TextStore interface {
	PutKnowledgeText(ctx context.Context, text string) (string, error)
	KnowledgeText(ctx context.Context, hash string) (string, error)
}

// Options are what the service runs on.
type Options struct {
	// Texts stores knowledge texts. Required.
	Texts TextStore
	// TaskQueue is where the workflows start; the task queue of the worker
	// that handles the operation when empty.
	TaskQueue string
	// PayloadKey is SITEOPS_PAYLOAD_KEY when the worker's client encrypts
	// payloads with it: onboard reads the input of a slug's existing run
	// back from history to tell the same spec from a different one.
	PayloadKey string
}

// Service handles the operations of package nexus/api.
type Service struct {
	o  Options
	dc converter.DataConverter
}

// New builds the handlers.
func New(o Options) (*Service, error) {
	if o.Texts == nil {
		return nil, fmt.Errorf("nexus: the service needs the store (Options.Texts) for knowledge texts")
	}
	s := &Service{o: o}
	if o.PayloadKey != "" {
		keys, err := codec.ParseKeyRing(o.PayloadKey)
		if err != nil {
			return nil, err
		}
		c, err := codec.NewRing(keys)
		if err != nil {
			return nil, err
		}
		s.dc = c.DataConverter()
	}
	return s, nil
}

// NexusService returns the Nexus service to register on a worker
// (worker.RegisterNexus).
func (s *Service) NexusService() (*nexusrpc.Service, error) {
	svc := nexusrpc.NewService(api.ServiceName)
	onboard, err := temporalnexus.NewTemporalOperation(temporalnexus.TemporalOperationOptions[api.OnboardInput, api.OnboardResult]{
		Name: api.OnboardName, Start: s.onboard,
	})
	if err != nil {
		return nil, err
	}
	rotate, err := temporalnexus.NewWorkflowRunOperationWithOptions(temporalnexus.WorkflowRunOperationOptions[api.RotateSecretInput, api.SecretRotation]{
		Name: api.RotateSecretName, Handler: s.rotateSecret,
	})
	if err != nil {
		return nil, err
	}
	err = svc.Register(
		nexusrpc.NewSyncOperation(api.StoreKnowledgeName, s.storeKnowledge),
		onboard,
		nexusrpc.NewSyncOperation(api.OnboardingStatusName, s.onboardingStatus),
		nexusrpc.NewSyncOperation(api.EmbedOffName, s.embedOff),
		nexusrpc.NewSyncOperation(api.EmbedOnName, s.embedOn),
		nexusrpc.NewSyncOperation(api.LeadSyncStatusName, s.leadSyncStatus),
		rotate,
	)
	if err != nil {
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
	return &starter.Starter{
		Client: temporalnexus.GetClient(ctx), Texts: s.o.Texts, TaskQueue: tq,
		Namespace: info.Namespace, DataConverter: s.dc,
	}
}
