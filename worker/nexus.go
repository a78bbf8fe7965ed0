package worker

import (
	nexusrpc "github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	sitenexus "github.com/siteops/siteops/nexus"
)

// NexusRegistry is where Nexus services are registered: a worker.
type NexusRegistry interface {
	RegisterNexusService(s *nexusrpc.Service)
}

// RegisterNexus registers siteops' Nexus service (package nexus) built on n.
func RegisterNexus(r NexusRegistry, n sitenexus.Options) error {
	svc, err := sitenexus.New(n)
	if err != nil {
		return err
	}
	ns, err := svc.NexusService()
	if err != nil {
		return err
	}
	r.RegisterNexusService(ns)
	return nil
}

// NewNexusWorker builds a worker on c and taskQueue that handles siteops'
// Nexus service and nothing else: an SDK worker polls workflow and
// activity tasks whether or not any are registered, so this one turns
// both pollers off rather than fail the tasks it would take from the
// worker that runs them. opts are the options of that worker (its
// deployment version, say). Run registers the service on its own worker
// instead when Options.Nexus is set.
func NewNexusWorker(c client.Client, taskQueue string, opts sdkworker.Options, n sitenexus.Options) (sdkworker.Worker, error) {
	if n.TaskQueue == "" {
		n.TaskQueue = taskQueue
	}
	opts.DisableWorkflowWorker, opts.LocalActivityWorkerOnly = true, true
	w := sdkworker.New(c, taskQueue, opts)
	if err := RegisterNexus(w, n); err != nil {
		return nil, err
	}
	return w, nil
}
