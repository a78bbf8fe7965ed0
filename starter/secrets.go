package starter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
)

// The stored signing secrets as operators read and change them: what the
// store holds of a registered endpoint's secret, the account's endpoints
// beside it, retiring one, re-encrypting them under a new key. These work
// on the store (and the API) alone, without Temporal. Functions that only
// read take open, which opens the store as it is and read-only
// (wiring.InspectStoreFromEnv), and say "unknown" where it cannot be read
// instead of failing.

// More states of a secret, as `siteops webhook list` and `siteops webhook
// create` name them beside those of StoredSecret.
const (
	// SecretUnreadable: stored, but it does not decrypt with
	// SITEOPS_SECRET_KEY; the ingress refuses deliveries signed with it.
	SecretUnreadable SecretState = "unreadable"
	// SecretUnknown: what the store holds cannot be told here (no store,
	// or no SITEOPS_SECRET_KEY to read it with).
	SecretUnknown SecretState = "unknown"
)

// Accepted reports whether the ingress accepts deliveries signed with a
// secret in this state, or may (SecretUnknown).
func (s SecretState) Accepted() bool {
	return s != SecretRetired && s != SecretNotStored && s != SecretUnreadable
}

// StoredSecretNow is StoredSecret in the store that open opens: a store
// that cannot be opened or read is SecretUnknown, with the reason.
func StoredSecretNow(ctx context.Context, open func(context.Context) (*store.Store, string, error), endpointID, fingerprint string, now time.Time) (SecretState, *time.Time, error) {
	st, _, err := open(ctx)
	if err != nil {
		return SecretUnknown, nil, err
	}
	defer func() { _ = st.Close() }()
	state, at, err := StoredSecret(ctx, st, endpointID, fingerprint, now)
	if err != nil {
		return SecretUnknown, nil, err
	}
	return state, at, nil
}

// Endpoint is one of the account's webhook endpoints as `siteops webhook
// list` shows it: the API's, and what the store holds of its secret.
type Endpoint struct {
	agentsite.WebhookEndpoint
	// Secret is SecretStored, SecretUnreadable, SecretRetired,
	// SecretNotStored (from SITEOPS_WEBHOOK_SECRETS, or created elsewhere)
	// or SecretUnknown.
	Secret      SecretState `json:"secret"`
	Receiver    string      `json:"receiver,omitempty"`
	Fingerprint string      `json:"fingerprint,omitempty"`
}

// EndpointLister lists the account's webhook endpoints:
// *agentsite.Client.
type EndpointLister interface {
	ListWebhookEndpoints(ctx context.Context) ([]agentsite.WebhookEndpoint, error)
}

var _ EndpointLister = (*agentsite.Client)(nil)

// ListEndpoints lists the account's endpoints with what the store that
// open opens holds of each one's secret: every secret is SecretUnknown
// when the store cannot be opened or read or has no key to read secrets
// with.
func ListEndpoints(ctx context.Context, api EndpointLister, open func(context.Context) (*store.Store, string, error)) ([]Endpoint, error) {
	eps, err := api.ListWebhookEndpoints(ctx)
	if err != nil {
		return nil, err
	}
	states, infos := storedSecretStates(ctx, open)
	out := make([]Endpoint, len(eps))
	for i, e := range eps {
		out[i] = Endpoint{WebhookEndpoint: e, Secret: SecretUnknown}
		if states == nil {
			continue
		}
		out[i].Secret = SecretNotStored
		if s, ok := states[e.ID]; ok {
			out[i].Secret = s
		}
		if info, ok := infos[e.ID]; ok {
			out[i].Receiver, out[i].Fingerprint = store.ReceiverName(info.Receiver), info.Fingerprint
		}
	}
	return out, nil
}

// storedSecretStates reads the state and the description of every stored
// secret, by endpoint; nil when they cannot be read. Unreadable comes
// before retired, and retired before stored.
func storedSecretStates(ctx context.Context, open func(context.Context) (*store.Store, string, error)) (map[string]SecretState, map[string]store.SecretInfo) {
	st, _, err := open(ctx)
	if err != nil {
		return nil, nil
	}
	defer func() { _ = st.Close() }()
	if !st.HasSecretKey() {
		return nil, nil
	}
	all, err1 := st.Secrets(ctx)
	bad, err2 := st.UnreadableSecrets(ctx)
	gone, err3 := st.RetiredSecrets(ctx)
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, nil
	}
	states, infos := map[string]SecretState{}, map[string]store.SecretInfo{}
	for _, s := range gone {
		infos[s.EndpointID] = s
	}
	for _, s := range all {
		states[s.EndpointID], infos[s.EndpointID] = SecretStored, s
	}
	for _, s := range gone {
		states[s.EndpointID] = SecretRetired
	}
	for _, s := range bad {
		states[s.EndpointID] = SecretUnreadable
	}
	return states, infos
}

// RetiredSecret is a stored secret that RetireSecret retired: from At on,
// deliveries signed with it are refused.
type RetiredSecret struct {
	EndpointID  string    `json:"endpoint_id"`
	Fingerprint string    `json:"fingerprint"`
	Receiver    string    `json:"receiver"`
	At          time.Time `json:"retired_at"`
}

// SecretRetirer finds and retires stored secrets: *store.Store.
type SecretRetirer interface {
	SecretLookup
	HasSecretKey() bool
	NoKeyError(ctx context.Context) error
	Retire(ctx context.Context, endpointID string, at time.Time) (store.SecretInfo, error)
	RetireUnreadable(ctx context.Context, endpointID string, at time.Time) (store.SecretInfo, error)
}

var _ SecretRetirer = (*store.Store)(nil)

// RetireSecret retires the stored secret of endpointID, or with
// fingerprint set, the one stored secret with that fingerprint, at at. A
// retirement is never postponed: an earlier one (or an earlier end of a
// rotation's grace period) stays, and At says when it is. Retiring seals
// the secret again, so the store needs its key (store.ErrNoSecretKey,
// saying which key sealed what is stored), and a secret that does not open
// with it is refused and left as it was (store.ErrSecretUnreadable; also
// store.ErrKeyMismatch when another key sealed it); a fingerprint of
// several secrets is store.ErrAmbiguous.
func RetireSecret(ctx context.Context, st SecretRetirer, endpointID, fingerprint string, at time.Time) (RetiredSecret, error) {
	return retireSecret(ctx, st, endpointID, fingerprint, at, st.Retire)
}

// RetireUnreadableSecret is RetireSecret that also retires a secret that
// does not open with the store's key (store.Store.RetireUnreadable): for a
// secret given up for good, whose row was damaged or whose key is lost; no
// key opens it afterwards.
func RetireUnreadableSecret(ctx context.Context, st SecretRetirer, endpointID, fingerprint string, at time.Time) (RetiredSecret, error) {
	return retireSecret(ctx, st, endpointID, fingerprint, at, st.RetireUnreadable)
}

func retireSecret(ctx context.Context, st SecretRetirer, endpointID, fingerprint string, at time.Time, retire func(context.Context, string, time.Time) (store.SecretInfo, error)) (RetiredSecret, error) {
	const notStored = "(a secret from SITEOPS_WEBHOOK_SECRETS is not stored: remove it from there)"
	if !st.HasSecretKey() {
		return RetiredSecret{}, st.NoKeyError(ctx)
	}
	if fingerprint != "" {
		found, err := st.SecretsByFingerprint(ctx, fingerprint)
		if err != nil {
			return RetiredSecret{}, err
		}
		switch len(found) {
		case 0:
			return RetiredSecret{}, fmt.Errorf("no stored secret has fingerprint %s %s: %w", fingerprint, notStored, store.ErrNotFound)
		case 1:
			endpointID = found[0].EndpointID
		default:
			return RetiredSecret{}, store.ErrAmbiguous
		}
	}
	info, err := retire(ctx, endpointID, at)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return RetiredSecret{}, fmt.Errorf("no secret is stored for endpoint %s %s: %w", endpointID, notStored, store.ErrNotFound)
		}
		return RetiredSecret{}, err
	}
	end := *info.RetiredAt
	if info.RetireAfter != nil && info.RetireAfter.Before(end) {
		end = *info.RetireAfter
	}
	return RetiredSecret{EndpointID: info.EndpointID, Fingerprint: info.Fingerprint, Receiver: info.Receiver, At: end}, nil
}

// Rekeyed is what Rekey did.
type Rekeyed struct {
	Reencrypted int `json:"reencrypted"`
	// StillUnreadable counts the active secrets that decrypt with neither
	// key: they stay refused, and as they were (nothing rewrites a secret
	// it cannot open). Unreadable names their endpoints.
	StillUnreadable int      `json:"still_unreadable"`
	Unreadable      []string `json:"still_unreadable_endpoints,omitempty"`
}

// Rekeyer re-encrypts the stored secrets: *store.Store.
type Rekeyer interface {
	HasSecretKey() bool
	Rekey(ctx context.Context, oldKey []byte) (int, error)
	UnreadableSecrets(ctx context.Context) ([]store.SecretInfo, error)
}

var _ Rekeyer = (*store.Store)(nil)

// Rekey re-encrypts every stored secret that decrypts with oldKey (nil:
// only the store's own key) under the store's key, in the current format,
// and counts the active secrets that still do not decrypt. A store
// without a key is ErrNewKeyUnset.
func Rekey(ctx context.Context, st Rekeyer, oldKey []byte) (Rekeyed, error) {
	if !st.HasSecretKey() {
		return Rekeyed{}, ErrNewKeyUnset
	}
	n, err := st.Rekey(ctx, oldKey)
	if err != nil {
		return Rekeyed{}, err
	}
	left, err := st.UnreadableSecrets(ctx)
	if err != nil {
		return Rekeyed{}, err
	}
	res := Rekeyed{Reencrypted: n, StillUnreadable: len(left)}
	for _, s := range left {
		res.Unreadable = append(res.Unreadable, s.EndpointID)
	}
	return res, nil
}

// ErrNewKeyUnset is Rekey without SITEOPS_SECRET_KEY, the key to
// re-encrypt under; it matches store.ErrNoSecretKey.
var ErrNewKeyUnset error = newKeyUnset{}

type newKeyUnset struct{}

func (newKeyUnset) Error() string        { return "SITEOPS_SECRET_KEY is not set; set it to the new key" }
func (newKeyUnset) Is(target error) bool { return target == store.ErrNoSecretKey }
