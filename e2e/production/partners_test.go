package production

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	nexuspb "go.temporal.io/api/nexus/v1"
	"go.temporal.io/api/operatorservice/v1"

	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// partnerDoor is a partner's way into siteops: its certificate (role
// partner, named as its namespace) and its own Nexus endpoint's id.
type partnerDoor struct {
	name, endpointID string
	web              *http.Client
}

// call runs op of siteops' Nexus service through endpointID over the
// frontend's HTTP API, as the partner, and returns the status and body.
func (p partnerDoor) call(t *testing.T, endpointID, op string, in any) (int, string) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + temporal.HTTPAddress + "/nexus/endpoints/" + endpointID + "/services/siteops/" + op
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.web.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", p.name, op, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(body)
}

// TestPartnersAreHeldApart runs two partners against one siteops worker on
// the cluster, each through its own Nexus endpoint (siteops-<partner>,
// which this server names to the worker) with its own certificate: one
// partner that fills its text quota and its running-onboarding slots is
// refused, and the other is not. Neither may use the other's endpoint.
func TestPartnersAreHeldApart(t *testing.T) {
	full := adminClient(t)
	ctx := t.Context()
	queue := fmt.Sprintf("partners-%d", time.Now().UnixNano())
	doors := map[string]*partnerDoor{}
	for _, p := range partners {
		name := fmt.Sprintf("siteops-%s", p)
		created, err := full.OperatorService().CreateNexusEndpoint(ctx, &operatorservice.CreateNexusEndpointRequest{Spec: &nexuspb.EndpointSpec{
			Name: name, Target: &nexuspb.EndpointTarget{Variant: &nexuspb.EndpointTarget_Worker_{Worker: &nexuspb.EndpointTarget_Worker{Namespace: namespace, TaskQueue: queue}}},
		}})
		if err != nil {
			t.Fatalf("creating the endpoint %s: %v", name, err)
		}
		id, version := created.GetEndpoint().GetId(), created.GetEndpoint().GetVersion()
		t.Cleanup(func() {
			_, _ = full.OperatorService().DeleteNexusEndpoint(ctx, &operatorservice.DeleteNexusEndpointRequest{Id: id, Version: version})
		})
		cert, key := roleCert(t, p, "partner")
		doors[p] = &partnerDoor{name: p, endpointID: id, web: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsAs(t, cert, key)}}}
	}
	acme, globex := doors[partners[0]], doors[partners[1]]

	// One worker, with a small quota and one running onboarding a
	// partner; the API is the simulator, answering every call after a
	// second so that an onboarding holds its slot while the test looks.
	_, simURL := newSimulator(t, simulator.Config{Faults: simulator.Faults{Latency: simulator.Duration(time.Second)}})
	dbURL := storetest.PostgresSchemaURL(t)
	st, err := store.Open(ctx, dbURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	const quota = 4096
	env := append(clusterEnv(), "SITEOPS_DATABASE_URL="+dbURL, "AGENTSITE_BASE_URL="+simURL, "AGENTSITE_API_KEY="+apiKey,
		"SITEOPS_TASK_QUEUE="+queue, "SITEOPS_METRICS_ADDR=", "SITEOPS_SECRET_KEY="+secretKey(),
		fmt.Sprintf("SITEOPS_NEXUS_TEXT_QUOTA=%d", quota), "SITEOPS_NEXUS_MAX_RUNNING_ONBOARDINGS=1")
	w := startProc(t, "worker", env, "worker")

	text := strings.Repeat("t", quota/2+100)
	var code int
	var body string
	siteopstest.Eventually(t, 60*time.Second, "the worker serves acme's first store-knowledge", func() bool {
		code, body = acme.call(t, acme.endpointID, api.StoreKnowledgeName, api.StoreKnowledgeInput{Text: text})
		return code == http.StatusOK
	})
	if code, body = acme.call(t, acme.endpointID, api.StoreKnowledgeName, api.StoreKnowledgeInput{Text: text + "x"}); code != http.StatusTooManyRequests || !strings.Contains(body, "nexus:endpoint:siteops-acme") {
		t.Fatalf("acme past its text quota: %d %s; want 429 naming its own endpoint's bucket\nworker log:\n%s", code, body, w.log.String())
	}
	if code, body = globex.call(t, globex.endpointID, api.StoreKnowledgeName, api.StoreKnowledgeInput{Text: text}); code != http.StatusOK {
		t.Errorf("globex, after acme filled its quota: %d %s; want 200", code, body)
	}

	// Slots: acme's first onboarding runs (its calls wait a second each);
	// its second is refused; globex's is not.
	spec := func(slug string) api.OnboardInput {
		return api.OnboardInput{
			Site: api.Site{Title: "Partner " + slug, Slug: slug, Type: "business", Template: "minimal",
				Content:     api.SiteContent{Headline: "Held apart", Subheadline: "One partner's slots", About: "A partner of siteops, onboarding through its own endpoint."},
				PersonaMode: "assistant", Languages: []string{"en"}},
			Agent: api.Agent{DisplayName: "Pia", EmbedEnabled: true, AllowedOrigins: []string{"https://" + slug + ".example"}},
			FAQs:  []api.FAQ{{Question: "Open?", Answer: "Yes.", Approved: true}},
		}
	}
	stamp := time.Now().UnixNano()
	if code, body = acme.call(t, acme.endpointID, api.OnboardName, spec(fmt.Sprintf("acme-one-%d", stamp))); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("acme's first onboarding: %d %s", code, body)
	}
	if code, body = acme.call(t, acme.endpointID, api.OnboardName, spec(fmt.Sprintf("acme-two-%d", stamp))); code != http.StatusTooManyRequests {
		t.Errorf("acme's second onboarding while its first runs: %d %s; want 429", code, body)
	}
	if code, body = globex.call(t, globex.endpointID, api.OnboardName, spec(fmt.Sprintf("globex-one-%d", stamp))); code != http.StatusCreated && code != http.StatusOK {
		t.Errorf("globex's onboarding while acme holds its slots: %d %s; want 201", code, body)
	}

	// A partner's certificate does not open another partner's endpoint.
	if code, body = acme.call(t, globex.endpointID, api.StoreKnowledgeName, api.StoreKnowledgeInput{Text: "x"}); code != http.StatusForbidden {
		t.Errorf("acme through globex's endpoint: %d %s; want 403", code, body)
	}
}
