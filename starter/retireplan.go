package starter

import (
	"context"
	"fmt"
	"time"

	"github.com/siteops/siteops/store"
)

// RetirePlan is what RetireSecret would do, read before it does it.
type RetirePlan struct {
	EndpointID  string `json:"endpoint_id"`
	Fingerprint string `json:"fingerprint"`
	Receiver    string `json:"receiver"`
	// At is when deliveries signed with the secret would stop being
	// accepted: the time asked for, or an earlier retirement, which stays.
	At time.Time `json:"retires_at"`
	// Unchanged says that the secret already retires (or retired) no later
	// than asked: retiring it again changes nothing.
	Unchanged bool `json:"unchanged"`
	// Unreadable says that the secret is active and does not decrypt
	// with the store's key: RetireSecret refuses it.
	Unreadable bool `json:"unreadable,omitempty"`
}

// SecretPlanner reads the stored secrets as RetireSecret would find them:
// *store.Store.
type SecretPlanner interface {
	SecretLookup
	HasSecretKey() bool
	NoKeyError(ctx context.Context) error
	Secrets(ctx context.Context) ([]store.SecretInfo, error)
	RetiredSecrets(ctx context.Context) ([]store.SecretInfo, error)
	UnreadableSecrets(ctx context.Context) ([]store.SecretInfo, error)
}

var _ SecretPlanner = (*store.Store)(nil)

// PlanRetire says what RetireSecret(st, endpointID, fingerprint, at) would
// do, and changes nothing. It finds the secret as RetireSecret does, and
// fails as it would: without the store's key (store.ErrNoSecretKey, as
// the store words it), for a
// secret that is not stored (store.ErrNotFound), for a fingerprint of
// several secrets (store.ErrAmbiguous). An active secret the key does not
// open, which RetireSecret refuses, is Unreadable.
func PlanRetire(ctx context.Context, st SecretPlanner, endpointID, fingerprint string, at time.Time) (RetirePlan, error) {
	const notStored = "(a secret from SITEOPS_WEBHOOK_SECRETS is not stored: remove it from there)"
	if !st.HasSecretKey() {
		return RetirePlan{}, st.NoKeyError(ctx)
	}
	var found []store.SecretInfo
	if fingerprint != "" {
		var err error
		if found, err = st.SecretsByFingerprint(ctx, fingerprint); err != nil {
			return RetirePlan{}, err
		}
		switch len(found) {
		case 0:
			return RetirePlan{}, fmt.Errorf("no stored secret has fingerprint %s %s: %w", fingerprint, notStored, store.ErrNotFound)
		case 1:
		default:
			return RetirePlan{}, store.ErrAmbiguous
		}
	} else {
		active, err := st.Secrets(ctx)
		if err != nil {
			return RetirePlan{}, err
		}
		retired, err := st.RetiredSecrets(ctx)
		if err != nil {
			return RetirePlan{}, err
		}
		for _, s := range append(active, retired...) {
			if s.EndpointID == endpointID {
				found = append(found, s)
				break
			}
		}
		if len(found) == 0 {
			return RetirePlan{}, fmt.Errorf("no secret is stored for endpoint %s %s: %w", endpointID, notStored, store.ErrNotFound)
		}
	}
	s := found[0]
	p := RetirePlan{EndpointID: s.EndpointID, Fingerprint: s.Fingerprint, Receiver: s.Receiver, At: at.UTC()}
	for _, end := range []*time.Time{s.RetiredAt, s.RetireAfter} {
		if end != nil && !end.After(p.At) {
			p.At, p.Unchanged = end.UTC(), true
		}
	}
	bad, err := st.UnreadableSecrets(ctx)
	if err != nil {
		return RetirePlan{}, err
	}
	for _, b := range bad {
		p.Unreadable = p.Unreadable || b.EndpointID == s.EndpointID
	}
	return p, nil
}
