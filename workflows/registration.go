package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/activities"
)

// Names of the endpoint registration workflow's messages.
const (
	EndpointRegistrationWorkflowName = "EndpointRegistration"
	// QueryRegistration answers EndpointRegistrationStatus.
	QueryRegistration = "status"
)

// Registration steps.
const (
	RegistrationCreating = "creating-endpoint"
	RegistrationDone     = "done"
)

// EndpointRegistrationInput registers a webhook endpoint at URL for Events,
// delivering to the ingress receiver Receiver ("" for POST /webhooks).
type EndpointRegistrationInput struct {
	URL      string   `json:"url"`
	Events   []string `json:"events"`
	Receiver string   `json:"receiver"`
	Operator string   `json:"operator,omitempty"`
}

// EndpointRegistrationStatus answers QueryRegistration and is the result.
type EndpointRegistrationStatus struct {
	Step        string   `json:"step"`
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Receiver    string   `json:"receiver"`
	EndpointID  string   `json:"endpoint_id,omitempty"`
	Fingerprint string   `json:"fingerprint,omitempty"`
}

// EndpointRegistrationID is the workflow ID of registering URL for events
// on receiver. It is derived from the request, so that repeating the same
// request (say after its answer was lost) reaches the same workflow and the
// same idempotency key; label, when given, makes a deliberate second
// registration of the same request a new operation.
func EndpointRegistrationID(url string, events []string, receiver, label string) string {
	evs := slices.Clone(events)
	slices.Sort(evs)
	sum := sha256.Sum256([]byte(url + "\n" + strings.Join(evs, ",") + "\n" + receiver))
	id := hex.EncodeToString(sum[:8])
	if label != "" {
		id += "-" + label
	}
	name := receiver
	if name == "" {
		name = "default"
	}
	return EndpointRegistrationKind.ID(name + "/" + id)
}

// EndpointRegistration creates a webhook endpoint and stores its one-time
// signing secret, encrypted, in one activity: the secret never enters
// history. Its idempotency key is derived from the workflow ID, so an
// attempt whose answer was lost is retried under the same key and the
// service replays the same endpoint and secret instead of creating a
// second one.
func EndpointRegistration(ctx workflow.Context, in EndpointRegistrationInput) (EndpointRegistrationStatus, error) {
	st := EndpointRegistrationStatus{Step: RegistrationCreating, URL: in.URL, Events: in.Events, Receiver: in.Receiver}
	if err := workflow.SetQueryHandler(ctx, QueryRegistration, func() (EndpointRegistrationStatus, error) { return st, nil }); err != nil {
		return st, err
	}
	if in.URL == "" || len(in.Events) == 0 {
		return st, errors.New("a registration needs a URL and at least one event type")
	}
	var a *activities.Activities
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	var created activities.CreatedEndpoint
	err := workflow.ExecuteActivity(apiActivity(ctx), a.CreateEndpoint, activities.CreateEndpointInput{
		IdempotencyKey: Key(id, "create-endpoint"), URL: in.URL, Events: in.Events, Receiver: in.Receiver,
	}).Get(ctx, &created)
	if err != nil {
		return st, err
	}
	st.Step, st.EndpointID, st.Fingerprint = RegistrationDone, created.EndpointID, created.Fingerprint
	return st, nil
}
