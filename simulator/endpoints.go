package simulator

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/siteops/siteops/agentsite"
)

type endpoint struct {
	ID           string                  `json:"id"`
	URL          string                  `json:"url"`
	Events       []string                `json:"events"`
	Status       string                  `json:"status"`
	CreatedAt    time.Time               `json:"created_at"`
	LastDelivery *agentsite.DeliveryInfo `json:"last_delivery"`
	LastError    *string                 `json:"last_error"`

	secret string
}

func (e *endpoint) subscribed(t string) bool {
	for _, ev := range e.Events {
		if ev == t {
			return true
		}
	}
	return false
}

func (s *Simulator) createEndpoint(r *http.Request, body []byte) response {
	var in struct {
		URL    *string  `json:"url"`
		Events []string `json:"events"`
	}
	if bad := decodeStrict(body, &in); bad != nil {
		return *bad
	}
	if in.URL == nil || *in.URL == "" {
		return fail(http.StatusUnprocessableEntity, "required", "url is required", "url")
	}
	if problem := checkReceiverURL(r.Context(), *in.URL, s.cfg.Resolver, s.cfg.AllowLoopbackReceivers); problem != "" {
		return fail(http.StatusUnprocessableEntity, "invalid_url", problem, "url")
	}
	if problem := checkEventTypes(in.Events); problem != "" {
		return fail(http.StatusUnprocessableEntity, "invalid_events", problem, "events")
	}
	secret, err := newSecret()
	if err != nil {
		return fail(http.StatusInternalServerError, "internal", "could not make a secret", "")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := &endpoint{ID: s.nextID("we"), URL: *in.URL, Events: in.Events, Status: "enabled", CreatedAt: s.now().UTC(), secret: secret}
	s.endpoints[e.ID] = e
	created := struct {
		*endpoint
		Secret string `json:"secret"`
	}{e, secret}
	return ok(http.StatusCreated, map[string]any{"data": created})
}

func newSecret() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "whsec_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

func (s *Simulator) listEndpoints(_ *http.Request, _ []byte) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := make([]*endpoint, 0, len(s.endpoints))
	for _, e := range s.endpoints {
		list = append(list, e)
	}
	slices.SortFunc(list, func(a, b *endpoint) int { return idCompare(a.ID, b.ID) })
	return ok(http.StatusOK, map[string]any{"data": list})
}

// idCompare orders prefix_<n> ids by n.
func idCompare(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

func (s *Simulator) deleteEndpoint(r *http.Request, _ []byte) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := r.PathValue("endpoint_id")
	if _, found := s.endpoints[id]; !found {
		return fail(http.StatusNotFound, "endpoint_not_found", "no webhook endpoint with id "+id, "endpoint_id")
	}
	delete(s.endpoints, id)
	return response{status: http.StatusNoContent}
}
