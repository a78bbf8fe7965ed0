package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
)

// FindEndpointInput names an endpoint to look up.
type FindEndpointInput struct {
	EndpointID string `json:"endpoint_id"`
}

// EndpointInfo is what a rotation needs of an endpoint.
type EndpointInfo struct {
	EndpointID string   `json:"endpoint_id"`
	URL        string   `json:"url"`
	Events     []string `json:"events"`
	// SecretStored says the store holds the endpoint's secret, active;
	// false when it comes from SITEOPS_WEBHOOK_SECRETS (or from nowhere
	// siteops knows). A rotation reports it: a rotation that ends without
	// deleting the endpoint leaves its secret as it was.
	SecretStored bool `json:"secret_stored,omitempty"`
}

// FindEndpoint reads an endpoint's URL and events from the endpoint list,
// and whether the store holds its secret.
func (a *Activities) FindEndpoint(ctx context.Context, in FindEndpointInput) (EndpointInfo, error) {
	eps, err := a.api.ListWebhookEndpoints(a.calling(ctx, agentsite.ClassOnboarding))
	if err != nil {
		return EndpointInfo{}, classify(err)
	}
	for _, e := range eps {
		if e.ID == in.EndpointID {
			stored, err := a.store.Secrets(ctx)
			if err != nil {
				return EndpointInfo{}, classify(err)
			}
			held := slices.ContainsFunc(stored, func(s store.SecretInfo) bool { return s.EndpointID == e.ID })
			return EndpointInfo{EndpointID: e.ID, URL: e.URL, Events: e.Events, SecretStored: held}, nil
		}
	}
	return EndpointInfo{}, nonRetryable(ErrTypeNotFound, fmt.Errorf("no webhook endpoint %s in the account's endpoint list", in.EndpointID))
}

// CreateEndpointInput registers a receiver and keeps its secret.
type CreateEndpointInput struct {
	IdempotencyKey string   `json:"idempotency_key"`
	URL            string   `json:"url"`
	Events         []string `json:"events"`
	// Receiver is the ingress path name the endpoint delivers to.
	Receiver string `json:"receiver"`
	// RotationWorkflowID, when set, is told of the endpoint's first
	// verified delivery.
	RotationWorkflowID string `json:"rotation_workflow_id,omitempty"`
}

// CreatedEndpoint identifies the new endpoint and its secret without
// revealing the secret.
type CreatedEndpoint struct {
	EndpointID  string `json:"endpoint_id"`
	Fingerprint string `json:"fingerprint"`
}

// expectSecretFor is how long the ingress may hold deliveries for a
// receiver whose new secret is being stored: one attempt (20 s) and a
// margin. The mark ends sooner, when the secret is stored.
const expectSecretFor = 30 * time.Second

// CreateEndpoint registers the endpoint and stores the one-time secret,
// encrypted, straight from the answer: the secret never leaves this
// activity. A retried attempt gets the same answer replayed under the same
// idempotency key, so the stored secret is the right one. It refuses before
// creating anything when the secret could not be stored (no
// SITEOPS_SECRET_KEY, or a key other than the stored secrets'), and when
// the URL does not lie under the deployment's public receiver URLs
// (ReceiverPolicy): whoever started the workflow, the account's events go
// nowhere else.
func (a *Activities) CreateEndpoint(ctx context.Context, in CreateEndpointInput) (CreatedEndpoint, error) {
	if err := a.receivers.Check(in.URL); err != nil {
		info := activity.GetInfo(ctx)
		activity.GetLogger(ctx).Warn("refused to create a webhook endpoint outside the deployment",
			"workflow_id", info.WorkflowExecution.ID, "workflow_type", info.WorkflowType.Name, "error", err)
		return CreatedEndpoint{}, nonRetryable(ErrTypePolicy, err)
	}
	if err := a.store.CheckSecretKey(ctx); err != nil {
		if errors.Is(err, store.ErrNoSecretKey) || errors.Is(err, store.ErrKeyMismatch) {
			return CreatedEndpoint{}, nonRetryable(ErrTypeSecretKey, err)
		}
		return CreatedEndpoint{}, classify(err)
	}
	// The service may deliver with the new secret before this activity has
	// stored it; the ingress holds such deliveries until it is stored.
	if err := a.store.ExpectSecret(ctx, in.Receiver, in.IdempotencyKey, a.now().Add(expectSecretFor)); err != nil {
		return CreatedEndpoint{}, classify(err)
	}
	created, err := a.createEndpoint(ctx, in)
	if err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.NonRetryable() {
			// Nothing will be stored: stop holding deliveries for it.
			_ = a.store.EndExpectation(context.WithoutCancel(ctx), in.Receiver, in.IdempotencyKey)
		}
		return CreatedEndpoint{}, err
	}
	if err := a.store.EndExpectation(ctx, in.Receiver, in.IdempotencyKey); err != nil {
		return CreatedEndpoint{}, classify(err)
	}
	activity.GetLogger(ctx).Info("webhook endpoint created; secret stored", "endpoint_id", created.EndpointID, "receiver", store.ReceiverName(in.Receiver), "fingerprint", created.Fingerprint)
	return created, nil
}

func (a *Activities) createEndpoint(ctx context.Context, in CreateEndpointInput) (CreatedEndpoint, error) {
	created, err := a.api.CreateWebhookEndpoint(a.calling(ctx, agentsite.ClassOnboarding), in.IdempotencyKey, agentsite.NewWebhookEndpoint{URL: in.URL, Events: in.Events})
	if err != nil {
		return CreatedEndpoint{}, classify(err)
	}
	id := created.Endpoint.ID
	// The rotation is known before the secret can verify anything.
	if in.RotationWorkflowID != "" {
		if err := a.store.SetRotation(ctx, id, in.RotationWorkflowID); err != nil {
			return CreatedEndpoint{}, classify(err)
		}
	}
	if err := a.store.PutSecretFrom(ctx, id, in.Receiver, in.IdempotencyKey, created.Secret); err != nil {
		if errors.Is(err, store.ErrNoSecretKey) || errors.Is(err, store.ErrKeyMismatch) {
			return CreatedEndpoint{}, nonRetryable(ErrTypeSecretKey, err)
		}
		return CreatedEndpoint{}, classify(err)
	}
	return CreatedEndpoint{EndpointID: id, Fingerprint: created.Secret.Fingerprint()}, nil
}

// DeleteEndpointInput removes an endpoint.
type DeleteEndpointInput struct {
	IdempotencyKey string `json:"idempotency_key"`
	EndpointID     string `json:"endpoint_id"`
}

// DeleteEndpoint deletes the endpoint; one that is already gone counts as
// deleted.
func (a *Activities) DeleteEndpoint(ctx context.Context, in DeleteEndpointInput) error {
	err := a.api.DeleteWebhookEndpoint(a.calling(ctx, agentsite.ClassOnboarding), in.IdempotencyKey, in.EndpointID)
	var apiErr *agentsite.APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
		return nil
	}
	return classify(err)
}

// RetireSecretInput stops accepting an endpoint's secret at a time; a zero
// At means now, by the activity's clock. Now retires it at once (writing
// retired_at) instead of scheduling its end after a grace period.
type RetireSecretInput struct {
	EndpointID string    `json:"endpoint_id"`
	At         time.Time `json:"at,omitzero"`
	Now        bool      `json:"now,omitempty"`
}

// RetireSecretResult says whether a stored secret was retired; false means
// the secret was not in the store (it is configured in
// SITEOPS_WEBHOOK_SECRETS and must be removed there).
type RetireSecretResult struct {
	Stored bool `json:"stored"`
}

// RetireSecret sets when the ingress stops accepting the secret. A secret
// that does not open with the worker's SITEOPS_SECRET_KEY is left as it
// was and the activity fails with ErrTypeSecretUnreadable, retried while
// another key may open it (see the type).
func (a *Activities) RetireSecret(ctx context.Context, in RetireSecretInput) (RetireSecretResult, error) {
	var err error
	if in.Now {
		_, err = a.store.Retire(ctx, in.EndpointID, a.now())
	} else {
		at := in.At
		if at.IsZero() {
			at = a.now()
		}
		err = a.store.RetireSecret(ctx, in.EndpointID, at)
	}
	if errors.Is(err, store.ErrNotFound) {
		return RetireSecretResult{}, nil
	}
	if err != nil {
		return RetireSecretResult{}, classify(err)
	}
	return RetireSecretResult{Stored: true}, nil
}

// FindCreatedInput names the endpoints an operation created: those whose
// creation's idempotency key starts with KeyPrefix.
type FindCreatedInput struct {
	KeyPrefix string `json:"key_prefix"`
	// URL and Receiver are what an endpoint must deliver to to be reused.
	URL      string `json:"url"`
	Receiver string `json:"receiver"`
	// RotationWorkflowID, when set, is told again of a reused endpoint's
	// verified deliveries.
	RotationWorkflowID string `json:"rotation_workflow_id,omitempty"`
}

// FoundCreated is what an earlier run of an operation left: an endpoint to
// reuse, endpoints to remove, and the key of the next creation.
type FoundCreated struct {
	// Reuse is a live endpoint at URL whose stored secret is active.
	Reuse *CreatedEndpoint `json:"reuse,omitempty"`
	// VerifiedEventID is the first verified delivery on Reuse, if any.
	VerifiedEventID string `json:"verified_event_id,omitempty"`
	// Stale are other live endpoints the operation created (another URL,
	// or a retired secret): left over, to be deleted.
	Stale []string `json:"stale,omitempty"`
	// Created counts the endpoints the operation created so far.
	Created int `json:"created"`
}

// FindCreatedEndpoint finds the endpoints an earlier run of the same
// operation created, from the store (which records the idempotency key of
// each creation) and the account's endpoint list.
func (a *Activities) FindCreatedEndpoint(ctx context.Context, in FindCreatedInput) (FoundCreated, error) {
	var out FoundCreated
	mine, err := a.store.SecretsFrom(ctx, in.KeyPrefix)
	if err != nil {
		return out, classify(err)
	}
	out.Created = len(mine)
	if len(mine) == 0 {
		return out, nil
	}
	eps, err := a.api.ListWebhookEndpoints(a.calling(ctx, agentsite.ClassOnboarding))
	if err != nil {
		return out, classify(err)
	}
	live := map[string]agentsite.WebhookEndpoint{}
	for _, e := range eps {
		live[e.ID] = e
	}
	now := a.now()
	for i := len(mine) - 1; i >= 0; i-- { // newest first
		s := mine[i]
		e, ok := live[s.EndpointID]
		if !ok {
			continue
		}
		if out.Reuse == nil && !s.Retired(now) && e.URL == in.URL && s.Receiver == in.Receiver {
			out.Reuse = &CreatedEndpoint{EndpointID: s.EndpointID, Fingerprint: s.Fingerprint}
			out.VerifiedEventID = s.VerifiedEvent
			continue
		}
		out.Stale = append(out.Stale, s.EndpointID)
	}
	if out.Reuse != nil && in.RotationWorkflowID != "" {
		if err := a.store.SetRotation(ctx, out.Reuse.EndpointID, in.RotationWorkflowID); err != nil {
			return out, classify(err)
		}
	}
	if out.Reuse != nil {
		activity.GetLogger(ctx).Info("reusing the endpoint an earlier run created", "endpoint_id", out.Reuse.EndpointID, "fingerprint", out.Reuse.Fingerprint)
	}
	return out, nil
}

// ReconcileSecretsResult says what a reconciliation did.
type ReconcileSecretsResult struct {
	// Checked counts the active stored secrets compared with the list.
	Checked int `json:"checked"`
	// Retired names the endpoints (gone from the account) whose secrets
	// were retired.
	Retired []string `json:"retired,omitempty"`
	// Upgraded counts secrets moved to the current sealing format: always
	// 0 since release 3, where siteops release finalize does it (kept for
	// the histories and status that carry it).
	Upgraded int `json:"upgraded"`
	// Withheld names the endpoints whose secrets were not retired although
	// the list did not name them, because the list named none of the
	// stored endpoints at all (see ReconcileSecrets).
	Withheld []string `json:"withheld,omitempty"`
}

// ReconcileSecrets retires every stored secret whose endpoint is no longer
// in the account's endpoint list (deleted through the API or a dashboard),
// so that a leaked secret of a deleted endpoint stops verifying. The store
// is read before the list: a secret stored before the list was taken
// belongs to an endpoint created before it, so a fresh endpoint is never
// taken for a deleted one. The list is read whole (the client follows
// next_cursor when the API pages it). A secret already scheduled to retire
// within MaxGracePeriod (a rotation's grace period) is left to end on time;
// one scheduled later is retired now. Secrets from
// SITEOPS_WEBHOOK_SECRETS are not stored and not touched. It also moves
// secrets still in the first sealing format to the current one (the lazy
// half of `siteops secret rekey`).
//
// A list that names none of the stored endpoints retires nothing: an empty
// answer, another account's (an AGENTSITE_API_KEY of another environment)
// or a failed one looks exactly like that, and retiring every secret on it
// would refuse every delivery until someone notices — events the sender
// drops for good after its eight attempts. The secrets are reported as
// withheld and logged as an error instead; when every endpoint really was
// deleted, `siteops secret retire` retires them. So a deleted endpoint's
// secret is retired within one period whenever the list still names
// another stored endpoint.
//
// A secret that does not open with the worker's SITEOPS_SECRET_KEY is
// never retired here: retiring seals it again, and without its key that
// would leave it readable by no key. The others are retired, then the
// activity fails naming it (ErrTypeSecretUnreadable, retried while
// another key may open it); the retried attempt finds only what is left.
func (a *Activities) ReconcileSecrets(ctx context.Context) (ReconcileSecretsResult, error) {
	var out ReconcileSecretsResult
	stored, err := a.store.Secrets(ctx)
	if err != nil {
		return out, classify(err)
	}
	out.Checked = len(stored)
	if len(stored) > 0 {
		eps, err := a.api.ListWebhookEndpoints(a.calling(ctx, agentsite.ClassBulk))
		if err != nil {
			return out, classify(err)
		}
		live := map[string]bool{}
		for _, e := range eps {
			live[e.ID] = true
		}
		var gone []store.SecretInfo
		listed := 0
		latest := a.now().Add(MaxGracePeriod)
		for _, s := range stored {
			switch {
			case live[s.EndpointID]:
				listed++
			case s.RetireAfter == nil, s.RetireAfter.After(latest):
				// A secret scheduled to retire within the longest grace
				// period a rotation may keep (after it deleted the
				// endpoint) ends on its own; one scheduled later than
				// that no rotation of this release set, and a deleted
				// endpoint's secret does not stay valid for it.
				gone = append(gone, s)
			}
		}
		if listed == 0 && len(gone) > 0 {
			for _, s := range gone {
				out.Withheld = append(out.Withheld, s.EndpointID)
			}
			activity.GetLogger(ctx).Error("the endpoint list names none of the stored endpoints; retiring none of their secrets, since an empty or another account's answer looks the same. If every endpoint was really deleted, run `siteops secret retire --endpoint ID` for each; otherwise check AGENTSITE_API_KEY and AGENTSITE_BASE_URL",
				"stored", len(gone), "listed", len(eps), "endpoints", out.Withheld)
			gone = nil
		}
		now := a.now()
		var unreadable []string
		var refused error
		for _, s := range gone {
			_, err := a.store.Retire(ctx, s.EndpointID, now)
			switch {
			case errors.Is(err, store.ErrSecretUnreadable):
				// Left as it was; the others are still retired.
				unreadable = append(unreadable, s.EndpointID)
				if refused == nil || errors.Is(err, store.ErrKeyMismatch) {
					refused = err
				}
				continue
			case err != nil && !errors.Is(err, store.ErrNotFound):
				return out, classify(err)
			}
			activity.GetLogger(ctx).Warn("retired the secret of an endpoint that no longer exists", "endpoint_id", s.EndpointID, "receiver", store.ReceiverName(s.Receiver), "fingerprint", s.Fingerprint)
			out.Retired = append(out.Retired, s.EndpointID)
		}
		if refused != nil {
			activity.GetLogger(ctx).Error("secrets of endpoints that no longer exist do not decrypt with this worker's SITEOPS_SECRET_KEY: left as they were, not retired",
				"endpoints", unreadable, "retired", out.Retired, "error", refused)
			return out, classify(fmt.Errorf("reconciling the stored secrets: %d whose endpoint is gone (%s) left unretired, %d retired: %w",
				len(unreadable), strings.Join(unreadable, ", "), len(out.Retired), refused))
		}
	}
	// Secrets still in the first format are re-sealed by `siteops release
	// finalize` (or `siteops secret rekey`), never here: until the release
	// is finalized the previous one may share the store (README,
	// "Upgrading"), and finalize is the recorded point after which the next
	// release may refuse the first format. Upgraded stays 0.
	return out, nil
}

// EndRotationInput names the endpoint whose rotation is over.
type EndRotationInput struct {
	EndpointID string `json:"endpoint_id"`
}

// EndRotation stops routing the endpoint's verifications to the rotation.
func (a *Activities) EndRotation(ctx context.Context, in EndRotationInput) error {
	return classify(a.store.EndRotation(ctx, in.EndpointID))
}
