package overview

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/siteops/siteops/store"
)

// The states of a stored secret in a list.
const (
	SecretActive     = "active"     // accepted, no retirement set
	SecretRetiring   = "retiring"   // accepted until its retirement
	SecretRetired    = "retired"    // refused
	SecretUnreadable = "unreadable" // does not decrypt with SITEOPS_SECRET_KEY: refused until fixed
)

// SecretStates lists the states a secret list filters by.
var SecretStates = []string{SecretActive, SecretRetiring, SecretRetired, SecretUnreadable}

// Secret is a stored signing secret as on-call lists it (never the secret
// itself), with the rotation of its endpoint when one is in flight.
type Secret struct {
	EndpointID  string    `json:"endpoint_id"`
	Receiver    string    `json:"receiver"`
	Fingerprint string    `json:"fingerprint"`
	State       string    `json:"state"`
	CreatedAt   time.Time `json:"created_at"`
	// RetiresAt is when it stops (or stopped) being accepted.
	RetiresAt     time.Time `json:"retires_at,omitzero"`
	VerifiedEvent string    `json:"first_verified_event,omitempty"`
	// Rotation is the rotation in flight that replaces or created it, and
	// its step.
	Rotation     string `json:"rotation,omitempty"`
	RotationStep string `json:"rotation_step,omitempty"`
	Next         string `json:"next,omitempty"`
}

// SecretFilter selects stored secrets: of one receiver, in one state, at
// most Limit (the options' otherwise).
type SecretFilter struct {
	Receiver string
	State    string
	Limit    int
}

// ListSecrets lists the stored signing secrets, oldest first, each with its
// state and, when Temporal can be read, the rotation in flight for its
// endpoint. A store without SITEOPS_SECRET_KEY lists them without telling
// unreadable ones apart.
func ListSecrets(ctx context.Context, o Options, f SecretFilter) ([]Secret, error) {
	o = o.withDefaults()
	if o.Store == nil {
		return nil, fmt.Errorf("overview: %s", o.NoStore)
	}
	if f.State != "" && !slices.Contains(SecretStates, f.State) {
		return nil, fmt.Errorf("state %q: use one of %v", f.State, SecretStates)
	}
	now := o.Now()
	active, err := o.Store.Secrets(ctx)
	if err != nil {
		return nil, err
	}
	retired, err := o.Store.RetiredSecrets(ctx)
	if err != nil {
		return nil, err
	}
	unreadable := map[string]bool{}
	if u, err := o.Store.UnreadableSecrets(ctx); err == nil {
		for _, s := range u {
			unreadable[s.EndpointID] = true
		}
	} else if !errors.Is(err, store.ErrNoSecretKey) {
		return nil, err
	}
	rotations := map[string]Rotation{}
	if o.Temporal != nil {
		if rs, err := ListRotations(ctx, o); err == nil {
			for _, r := range rs {
				rotations[r.EndpointID] = r
				if r.NewEndpointID != "" {
					rotations[r.NewEndpointID] = r
				}
			}
		}
	}
	limit := f.Limit
	if limit <= 0 {
		limit = o.Limit
	}
	var out []Secret
	for _, i := range slices.Concat(active, retired) {
		s := Secret{EndpointID: i.EndpointID, Receiver: store.ReceiverName(i.Receiver), Fingerprint: i.Fingerprint, CreatedAt: i.CreatedAt.UTC(), VerifiedEvent: i.VerifiedEvent}
		if t := firstOf(i.RetireAfter, i.RetiredAt); t != nil {
			s.RetiresAt = t.UTC()
		}
		switch {
		case i.Retired(now):
			s.State = SecretRetired
		case unreadable[i.EndpointID]:
			s.State = SecretUnreadable
			s.Next = "deliveries signed with it are refused: set SITEOPS_SECRET_KEY to the key that stored it, or run siteops secret rekey (docs/webhooks.md)"
		case !s.RetiresAt.IsZero():
			s.State = SecretRetiring
		default:
			s.State = SecretActive
		}
		if r, ok := rotations[i.EndpointID]; ok {
			s.Rotation, s.RotationStep = r.WorkflowID, r.Step
			if s.Next == "" {
				s.Next = r.Next
			}
		}
		if (f.Receiver != "" && s.Receiver != f.Receiver) || (f.State != "" && s.State != f.State) {
			continue
		}
		out = append(out, s)
		if len(out) == limit {
			break
		}
	}
	if out == nil {
		out = []Secret{}
	}
	return out, nil
}

// firstOf is the earlier of two optional times.
func firstOf(a, b *time.Time) *time.Time {
	switch {
	case a == nil:
		return b
	case b == nil || a.Before(*b):
		return a
	}
	return b
}
