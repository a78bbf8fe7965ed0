package wiring

import (
	"log/slog"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/config"
)

// APITimeout bounds one Agent-Site request; the workflows give an activity
// attempt 20 s.
const APITimeout = 10 * time.Second

// APIClient builds the Agent-Site client of a process from a's settings,
// with the one adaptive rate limit that every caller of the process shares
// for the key: every Retry-After pauses them all, and each 429 lowers the
// rate, which recovers as answers succeed. With SITEOPS_API_RATE_LIMIT set
// the rate never exceeds it; unset, requests go as fast as callers ask
// until the first 429, then at most config.DefaultAPIRateLimit per second.
// Loopback receivers (the simulator's test mode) are logged loudly.
func APIClient(a config.AgentSite, logger *slog.Logger, opts ...agentsite.Option) (*agentsite.Client, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	limOpts := []agentsite.LimiterOption{agentsite.WithMaxRate(config.DefaultAPIRateLimit), agentsite.WithUnlimitedStart()}
	if a.RateLimit > 0 {
		limOpts = []agentsite.LimiterOption{agentsite.WithMaxRate(a.RateLimit), agentsite.WithMinRate(min(1, a.RateLimit))}
	}
	lim, err := agentsite.NewLimiter(append(limOpts, agentsite.WithHeadroom(a.Headroom, 0))...)
	if err != nil {
		return nil, config.Invalid("SITEOPS_API_RATE_LIMIT=%g, SITEOPS_API_HEADROOM=%g: %v", a.RateLimit, a.Headroom, err)
	}
	all := []agentsite.Option{agentsite.WithTimeout(APITimeout), agentsite.WithLimiter(lim)}
	if a.AllowLoopback {
		if logger != nil {
			logger.Warn("TEST MODE: webhook endpoints may point at loopback receivers (SITEOPS_ALLOW_LOOPBACK_RECEIVERS)")
		}
		all = append(all, agentsite.WithLoopbackReceivers())
	}
	c, err := agentsite.NewClient(a.BaseURL, a.APIKey, append(all, opts...)...)
	if err != nil {
		return nil, config.Invalid("%v", err)
	}
	return c, nil
}

// APIClientFromEnv is APIClient of the settings in the environment
// (AGENTSITE_*, SITEOPS_API_RATE_LIMIT), for a command: nothing logged.
func APIClientFromEnv() (*agentsite.Client, error) {
	var a config.AgentSite
	if err := config.Load(&a); err != nil {
		return nil, err
	}
	return APIClient(a, nil)
}
