package webhookingress

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
)

// SecretStore is where signing secrets of registered endpoints live.
type SecretStore interface {
	ActiveSecrets(ctx context.Context, receiver string) ([]store.SecretInfo, []agentsite.SigningSecret, error)
}

// EnvEndpoint names the secrets of SITEOPS_WEBHOOK_SECRETS in the inbox.
const EnvEndpoint = "env"

// secretSet is the secrets a receiver accepts, and whose each one is.
type secretSet struct {
	secrets   []string
	endpoints []string
	fetched   time.Time
}

// secretSource answers the secrets of a receiver path: for the default
// receiver ("", POST /webhooks) the configured secrets plus any stored for
// it; for a named receiver, the stored ones. Stored secrets are cached for
// refresh, so that a newly stored secret is accepted within that time.
type secretSource struct {
	env     []string
	store   SecretStore // nil when no store secrets are used
	refresh time.Duration
	now     func() time.Time

	mu    sync.Mutex
	cache map[string]secretSet
}

// errUnknownReceiver means the receiver has no secret at all.
var errUnknownReceiver = errors.New("unknown receiver")

func (s *secretSource) lookup(ctx context.Context, receiver string) (secretSet, error) {
	s.mu.Lock()
	cached, ok := s.cache[receiver]
	s.mu.Unlock()
	if ok && s.now().Sub(cached.fetched) < s.refresh {
		return cached, nil
	}
	set := secretSet{fetched: s.now()}
	if receiver == "" {
		for _, sec := range s.env {
			set.secrets = append(set.secrets, sec)
			set.endpoints = append(set.endpoints, EnvEndpoint)
		}
	}
	if s.store != nil {
		infos, secrets, err := s.store.ActiveSecrets(ctx, receiver)
		switch {
		case errors.Is(err, store.ErrNoSecretKey) && receiver == "":
			// Only the configured secrets are used on POST /webhooks.
		case err != nil:
			return secretSet{}, err
		}
		for i, sec := range secrets {
			set.secrets = append(set.secrets, sec.Reveal())
			set.endpoints = append(set.endpoints, infos[i].EndpointID)
		}
	}
	if len(set.secrets) == 0 {
		return secretSet{}, errUnknownReceiver
	}
	s.mu.Lock()
	s.cache[receiver] = set
	s.mu.Unlock()
	return set, nil
}

// forget drops the cached secrets of a receiver.
func (s *secretSource) forget(receiver string) {
	s.mu.Lock()
	delete(s.cache, receiver)
	s.mu.Unlock()
}
