package starter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// TextStore keeps knowledge texts by hash.
type TextStore interface {
	// PutKnowledgeTexts stores texts and returns their hashes, in order.
	PutKnowledgeTexts(ctx context.Context, texts []string) ([]string, error)
}

// LeadSyncReader reads what the lead event shards did for a site (the
// store).
type LeadSyncReader interface {
	LeadSiteSyncs(ctx context.Context, siteID string) (store.LeadSiteSyncs, error)
}

// Starter starts and drives siteops workflows.
type Starter struct{ o Options }

// Options configure a Starter (New).
type Options struct {
	Client client.Client
	Texts  TextStore // needed by Onboard only
	// LeadSyncs, when set, is where LeadProgress finds what the lead
	// event shards did for a site, which it adds to the site's own lead
	// sync's progress.
	LeadSyncs LeadSyncReader
	TaskQueue string
	// Namespace is where the search attributes of incidents are looked up;
	// "default" when empty.
	Namespace string
	// DataConverter reads workflow inputs back from history (the client's
	// own, with the payload codec when one is used); the SDK's default
	// when nil.
	DataConverter converter.DataConverter
	// Warn, when set, is told of things a caller should know but that do
	// not stop the operation (e.g. search attributes not registered).
	Warn func(msg string)
	// Receivers, when set, is checked before an endpoint is registered or
	// rotated to (PolicyError); the worker checks it whatever the caller.
	Receivers *activities.ReceiverPolicy
	// Patience is how long a call keeps being retried while Temporal is
	// unavailable (IsUnavailable) before it fails with *UnavailableError;
	// the caller's context bounds it too. Zero: no retry beyond the SDK's
	// own, and Temporal's errors as they are.
	Patience time.Duration
	// Address is Temporal's frontend, named in an *UnavailableError.
	Address string
	// Retrying, when set, is told once when a call finds Temporal
	// unavailable and is about to be tried again.
	Retrying func(msg string)
}

// New returns a Starter of o.
func New(o Options) *Starter { return &Starter{o: o.withDefaults()} }

// withDefaults returns o with the namespace "default" and the SDK's data
// converter where it left them empty.
func (o Options) withDefaults() Options {
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.DataConverter == nil {
		o.DataConverter = converter.GetDefaultDataConverter()
	}
	return o
}

// Client is the Temporal client the Starter calls.
func (s *Starter) Client() client.Client { return s.o.Client }

// Namespace is the Temporal namespace the Starter works in ("default"
// when its Options left it empty).
func (s *Starter) Namespace() string { return s.namespace() }

// TaskQueue is the task queue the Starter starts workflows on.
func (s *Starter) TaskQueue() string { return s.o.TaskQueue }

// DataConverter reads workflow inputs back from history; nil for the
// SDK's default.
func (s *Starter) DataConverter() converter.DataConverter { return s.o.DataConverter }

// StartOptions are the options every start of a workflow of kind k with
// ID id uses: the task queue, the kind's ID policies, and its priority,
// whose fairness key is what the ID is about (a site, an endpoint), or
// none for a kind whose runs share by caller (Kind.CallerFairness: an
// onboarding). A caller that starts on behalf of someone (a partner) sets
// the fairness key to them.
func (s *Starter) StartOptions(k workflows.Kind, id string) client.StartWorkflowOptions {
	return s.options(k, id)
}

func (s *Starter) options(k workflows.Kind, id string) client.StartWorkflowOptions {
	key := strings.TrimPrefix(id, k.Prefix)
	if k.CallerFairness {
		key = ""
	}
	return client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                s.o.TaskQueue,
		WorkflowIDReusePolicy:    k.Policy.Reuse,
		WorkflowIDConflictPolicy: k.Policy.Conflict,
		Priority:                 k.Priority(key),
	}
}

func (s *Starter) namespace() string { return s.o.Namespace }

func (s *Starter) converter() converter.DataConverter { return s.o.DataConverter }

func (s *Starter) warn(format string, args ...any) {
	if s.o.Warn != nil {
		s.o.Warn(fmt.Sprintf(format, args...))
	}
}

// The search attributes siteops sets, where the server has them registered
// (deploy/temporal-setup.sh registers them): the site and operator of an
// embed incident, and the caller an onboarding started through the Nexus
// service counts against (package nexus limits running onboardings by it).
const (
	SearchAttrSiteID   = "SiteopsSiteID"
	SearchAttrOperator = "SiteopsOperator"
	SearchAttrCaller   = "SiteopsCaller"
)

// SearchAttributes lists the search attributes siteops uses and their type.
var SearchAttributes = map[string]enumspb.IndexedValueType{
	SearchAttrSiteID:   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SearchAttrOperator: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SearchAttrCaller:   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}

// MissingSearchAttributes returns the search attributes siteops uses that
// the namespace does not have with the right type, in name order.
func (s *Starter) MissingSearchAttributes(ctx context.Context) ([]string, error) {
	resp, err := s.o.Client.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.namespace()})
	if err != nil {
		return nil, err
	}
	custom := resp.GetCustomAttributes()
	var missing []string
	for _, name := range slices.Sorted(maps.Keys(SearchAttributes)) {
		if custom[name] != SearchAttributes[name] {
			missing = append(missing, name)
		}
	}
	return missing, nil
}

// incidentSearchAttributes are the search attributes an incident carries.
func incidentSearchAttributes(siteID, operator string) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(
		temporal.NewSearchAttributeKeyKeyword(SearchAttrSiteID).ValueSet(siteID),
		temporal.NewSearchAttributeKeyKeyword(SearchAttrOperator).ValueSet(operator),
	)
}

// Wait waits for the run to end and reads its result into valuePtr. A
// failed run gives a *WorkflowFailedError with its root cause; a wait that
// ctx ended gives *ErrStoppedWaiting (the workflow goes on); Temporal
// unavailable for longer than Patience an *UnavailableError.
func (s *Starter) Wait(ctx context.Context, run client.WorkflowRun, valuePtr any) error {
	err := s.Patiently(ctx, "waiting for "+run.GetID(), func() error { return run.Get(ctx, valuePtr) })
	return waitErr(ctx, run.GetID(), run.GetRunID(), err)
}

// isNotFound reports whether err is Temporal's not-found.
func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// requestID makes an id for one request, to tell later whether a workflow
// was started by it.
func requestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
