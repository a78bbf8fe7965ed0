package ingress

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/store"
)

// Checking a captured delivery (siteops signature verify) the way the
// ingress verifies one: against the secrets of SITEOPS_WEBHOOK_SECRETS or
// those stored for one receiver, saying which secret signed it by its
// place and fingerprint, never the secret.

// CaptureSecrets are the secrets a captured delivery is checked against.
type CaptureSecrets struct {
	Secrets []string
	// Endpoints names each secret's endpoint when they are the secrets
	// stored for Receiver; nil for SITEOPS_WEBHOOK_SECRETS.
	Endpoints []string
	Receiver  string
}

// ActiveSecretStore reads the active secrets of a receiver:
// *store.Store.
type ActiveSecretStore interface {
	ActiveSecrets(ctx context.Context, receiver string) (store.ActiveSet, error)
}

var _ ActiveSecretStore = (*store.Store)(nil)

// StoredCaptureSecrets are the active secrets stored for receiver
// (store.ReceiverName's "default" is POST /webhooks) that decrypt with the
// store's key. None is store.ErrNotFound, saying how many do not decrypt.
func StoredCaptureSecrets(ctx context.Context, st ActiveSecretStore, receiver string) (CaptureSecrets, error) {
	if receiver == store.ReceiverName("") {
		receiver = ""
	}
	set, err := st.ActiveSecrets(ctx, receiver)
	if err != nil {
		return CaptureSecrets{}, err
	}
	cs := CaptureSecrets{Receiver: receiver}
	for i, sec := range set.Secrets {
		cs.Secrets = append(cs.Secrets, sec.Reveal())
		cs.Endpoints = append(cs.Endpoints, set.Infos[i].EndpointID)
	}
	if len(cs.Secrets) == 0 {
		msg := fmt.Sprintf("no active secret is stored for receiver %s", store.ReceiverName(receiver))
		if len(set.Unreadable) > 0 {
			msg += fmt.Sprintf(" that decrypts with SITEOPS_SECRET_KEY (%d do not; see `siteops doctor`)", len(set.Unreadable))
		}
		return CaptureSecrets{}, fmt.Errorf("%s: %w", msg, store.ErrNotFound)
	}
	return cs, nil
}

// CaptureCheck is a captured delivery that verified: signed with secret
// Secret (from 1) of Of. Its fields are in the order of the keys of the
// JSON object it has always been.
type CaptureCheck struct {
	EndpointID  string `json:"endpoint_id,omitempty"`
	Fingerprint string `json:"fingerprint"`
	Of          int    `json:"of"`
	Secret      int    `json:"secret"`
	Valid       bool   `json:"valid"`
}

// CheckCapture verifies a captured delivery's body and svc-signature
// header against s at now, as the ingress does, with the replay window
// window. A failure says what to check: the body byte for byte, the
// secrets, the clock.
func CheckCapture(body []byte, header string, s CaptureSecrets, now time.Time, window time.Duration) (CaptureCheck, error) {
	idx, err := webhook.Verify(body, header, s.Secrets, now, window)
	switch {
	case errors.Is(err, webhook.ErrNoValidSignature):
		holder := "SITEOPS_WEBHOOK_SECRETS holds"
		if s.Endpoints != nil {
			holder = fmt.Sprintf("the secrets stored for receiver %s hold", store.ReceiverName(s.Receiver))
		}
		return CaptureCheck{}, fmt.Errorf("%w; check that the body is byte for byte what was received (no proxy re-encoding), and that %s this endpoint's secret", err, holder)
	case errors.Is(err, webhook.ErrTimestampOutsideWindow):
		return CaptureCheck{}, fmt.Errorf("%w; a replayed delivery, or a clock to fix (use --window to widen the check for an old capture)", err)
	case err != nil:
		return CaptureCheck{}, err
	}
	c := CaptureCheck{Valid: true, Secret: idx + 1, Of: len(s.Secrets), Fingerprint: agentsite.NewSigningSecret(s.Secrets[idx]).Fingerprint()}
	if s.Endpoints != nil {
		c.EndpointID = s.Endpoints[idx]
	}
	return c, nil
}
