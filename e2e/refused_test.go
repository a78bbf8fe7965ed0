package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/inbox"
	"github.com/siteops/siteops/ingress"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/telemetry/telemetrytest"
)

// TestRefusedDeliveriesListed is item 3 of issue 33 against a running
// `siteops ingress`, on both stores: deliveries it refuses before
// recording anything — forged ones to the default receiver, ones to a
// receiver path nobody holds (a retired endpoint's), a stale one — are
// listed by `siteops events list --refused` within seconds, one row per
// receiver, reason and minute with their counts, and none of the
// sender's header values, bodies or secrets; the admin /metrics counts
// them by receiver, every name the ingress does not hold under _unknown;
// and a valid delivery sent after them is still accepted.
func TestRefusedDeliveriesListed(t *testing.T) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			e := newEnv(t, d, simulator.Config{})
			const secret = "whsec_refused_e2e" //nolint:gosec // made up for the test
			p := e.startMeasuredIngress(t, "SITEOPS_WEBHOOK_SECRETS="+secret)
			body := `{"id":"evt_refused_body","type":"lead.created","created_at":"2026-11-22T09:00:00.000Z","data":{"site_id":"site_private","lead_id":"lead_1"}}`
			send := func(path, signedWith string, at time.Time) int {
				t.Helper()
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, p.url+path, strings.NewReader(body))
				req.Header.Set("svc-event-id", "evt_header_only")
				req.Header.Set("svc-event-type", "header.only")
				req.Header.Set("svc-signature", webhook.Sign(signedWith, at, []byte(body)))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				return resp.StatusCode
			}
			for range 3 {
				if code := send("/webhooks", "whsec_not_ours", time.Now()); code != http.StatusUnauthorized {
					t.Fatalf("a forged delivery = %d, want 401", code)
				}
			}
			for range 2 {
				if code := send("/webhooks/retired-v1", secret, time.Now()); code != http.StatusUnauthorized {
					t.Fatalf("a delivery to a receiver nobody holds = %d, want 401", code)
				}
			}
			if code := send("/webhooks", secret, time.Now().Add(-time.Hour)); code != http.StatusUnauthorized {
				t.Fatalf("a stale delivery = %d, want 401", code)
			}

			want := map[string]int64{"default/invalid_signature": 3, "retired-v1/unknown_receiver": 2, "default/timestamp_outside_window": 1}
			var raw string
			var got map[string]int64
			siteopstest.Eventually(t, 15*time.Second, "the refusals in events list --refused", func() bool {
				out, errOut, code := e.runSplit(t, nil, "", "events", "list", "--refused", "--since", "1h", "-o", "json")
				if code != 0 {
					t.Fatalf("events list --refused: exit %d\n%s%s", code, out, errOut)
				}
				var l inbox.RefusedList
				if err := json.Unmarshal([]byte(out), &l); err != nil {
					t.Fatalf("events list --refused printed %s (%v)", out, err)
				}
				raw, got = out, map[string]int64{}
				for _, r := range l.Refused {
					got[r.Receiver+"/"+r.Reason] += r.Count
					if r.Status != http.StatusUnauthorized || r.EventID != "" || r.EventType != "" {
						t.Errorf("row %+v: want status 401 and no event (no signature verified)", r)
					}
				}
				for k, n := range want {
					if got[k] != n {
						return false
					}
				}
				return len(got) == len(want)
			})
			t.Logf("events list --refused: %v", got)
			for _, never := range []string{secret, "whsec_not_ours", "evt_header_only", "header.only", "evt_refused_body", "site_private"} {
				if strings.Contains(raw, never) {
					t.Errorf("events list --refused shows %q:\n%s", never, raw)
				}
			}
			if out, code := e.run(t, nil, "events", "list", "--refused", "--receiver", "retired-v1"); code != 0 || !strings.Contains(out, "unknown_receiver") || strings.Contains(out, "invalid_signature") {
				t.Errorf("events list --refused --receiver retired-v1: exit %d\n%s", code, out)
			}

			resp, err := http.Get(p.admin + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			text, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			mfs := telemetrytest.Families(t, string(text))
			for _, c := range []struct {
				receiver, reason string
				want             float64
			}{
				{"default", "invalid_signature", 3},
				{ingress.UnknownReceiverLabel, "unknown_receiver", 2},
				{"default", "timestamp_outside_window", 1},
			} {
				if v := telemetrytest.ValueIn(t, mfs, "siteops_webhook_refusals_total", "receiver", c.receiver, "reason", c.reason); v != c.want {
					t.Errorf("siteops_webhook_refusals_total{receiver=%q,reason=%q} = %v, want %v", c.receiver, c.reason, v, c.want)
				}
			}
			if strings.Contains(string(text), "retired-v1") {
				t.Error("/metrics names the receiver nobody holds: a made-up name would make a series")
			}
			if code := deliverBody(t, p.url+"/webhooks", "evt_after_refusals", "lead.created",
				`{"id":"evt_after_refusals","type":"lead.created","created_at":"2026-11-22T09:00:00.000Z","data":{"site_id":"site_x","lead_id":"lead_2"}}`, secret); code != http.StatusOK {
				t.Errorf("a valid delivery after the refusals = %d, want 200", code)
			}
			if strings.Contains(p.log.String(), secret) {
				t.Error("the ingress logged the secret")
			}
		})
	}
}
