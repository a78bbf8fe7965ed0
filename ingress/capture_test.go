package ingress

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// TestCheckCapture verifies a captured delivery as the ingress does: it
// names the secret that signed it by its place and fingerprint (and its
// endpoint when stored), and says what to check when none did or the
// capture is too old.
func TestCheckCapture(t *testing.T) {
	now := time.Now()
	body := []byte(`{"id":"evt_1","type":"lead.created","data":{"site_id":"s"}}`)
	header := webhook.Sign("whsec_two", now, body)
	env := CaptureSecrets{Secrets: []string{"whsec_one", "whsec_two"}}

	got, err := CheckCapture(body, header, env, now, webhook.DefaultWindow)
	want := CaptureCheck{Valid: true, Secret: 2, Of: 2, Fingerprint: agentsite.NewSigningSecret("whsec_two").Fingerprint()}
	if err != nil || got != want {
		t.Errorf("CheckCapture = %+v, %v; want %+v", got, err, want)
	}
	stored := CaptureSecrets{Secrets: []string{"whsec_two"}, Endpoints: []string{"we_2"}, Receiver: "v2"}
	if got, err := CheckCapture(body, header, stored, now, webhook.DefaultWindow); err != nil || got.EndpointID != "we_2" || got.Secret != 1 {
		t.Errorf("CheckCapture with stored secrets = %+v, %v; want secret 1, endpoint we_2", got, err)
	}

	_, err = CheckCapture(body, header, CaptureSecrets{Secrets: []string{"whsec_one"}}, now, webhook.DefaultWindow)
	if !errors.Is(err, webhook.ErrNoValidSignature) || !strings.Contains(err.Error(), "that SITEOPS_WEBHOOK_SECRETS holds this endpoint's secret") {
		t.Errorf("a body signed with another secret = %v; want ErrNoValidSignature naming SITEOPS_WEBHOOK_SECRETS", err)
	}
	_, err = CheckCapture(body, header, CaptureSecrets{Secrets: []string{"whsec_one"}, Endpoints: []string{"we_1"}}, now, webhook.DefaultWindow)
	if !errors.Is(err, webhook.ErrNoValidSignature) || !strings.Contains(err.Error(), "the secrets stored for receiver default hold") {
		t.Errorf("a body signed with no stored secret = %v; want ErrNoValidSignature naming the receiver", err)
	}
	_, err = CheckCapture(body, header, env, now.Add(time.Hour), webhook.DefaultWindow)
	if !errors.Is(err, webhook.ErrTimestampOutsideWindow) || !strings.Contains(err.Error(), "--window") {
		t.Errorf("an old capture = %v; want ErrTimestampOutsideWindow pointing at --window", err)
	}
}

// TestStoredCaptureSecrets reads the active secrets stored for a receiver
// ("default" is POST /webhooks), with their endpoints; none is
// store.ErrNotFound.
func TestStoredCaptureSecrets(t *testing.T) {
	ctx := t.Context()
	st := storetest.Open(t, store.SQLite)
	for ep, receiver := range map[string]string{"we_1": "", "we_2": "v2"} {
		if err := st.PutSecret(ctx, ep, receiver, agentsite.NewSigningSecret("whsec_"+ep)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := StoredCaptureSecrets(ctx, st, "default")
	if err != nil || len(got.Secrets) != 1 || got.Secrets[0] != "whsec_we_1" || got.Endpoints[0] != "we_1" || got.Receiver != "" {
		t.Errorf("StoredCaptureSecrets(default) = %+v, %v; want we_1's secret", got.Endpoints, err)
	}
	if got, err := StoredCaptureSecrets(ctx, st, "v2"); err != nil || len(got.Endpoints) != 1 || got.Endpoints[0] != "we_2" {
		t.Errorf("StoredCaptureSecrets(v2) = %+v, %v; want we_2's secret", got.Endpoints, err)
	}
	if _, err := StoredCaptureSecrets(ctx, st, "v3"); !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "no active secret is stored for receiver v3") {
		t.Errorf("StoredCaptureSecrets(v3) = %v; want store.ErrNotFound naming the receiver", err)
	}
}
