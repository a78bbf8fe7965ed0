package ingress

import (
	"fmt"
	"net/http"
)

// refusalLimit is a limit of the webhook port that refuses requests: the
// setting that moves it ("" for a limit that is no setting's) and its
// value as the handler applies it to a request.
type refusalLimit struct {
	setting string
	value   func(h *Handler, r *http.Request) string
}

// refusalLimits are the limits by the reason of the refusals they cause.
// The log line of each refusal says the limit and its setting, so that
// on-call reading it knows what to raise; docs/webhooks.md's table of
// answers and the README's configuration table name the same settings
// (TestRefusalLimitsAreDocumented).
var refusalLimits = map[string]refusalLimit{
	"body_too_large": {"SITEOPS_INGRESS_MAX_BODY", func(h *Handler, _ *http.Request) string {
		return fmt.Sprintf("bodies of at most %d bytes", h.opts.MaxBody)
	}},
	"busy": {"SITEOPS_INGRESS_MAX_CONCURRENT", func(h *Handler, _ *http.Request) string {
		return fmt.Sprintf("%d deliveries over %d bytes verifying and recording at once (%d smaller ones), each waiting up to %s for its turn",
			h.opts.MaxConcurrent, SmallBody, h.opts.MaxConcurrentSmall, h.opts.SlotWait)
	}},
	"connection_shed": {"SITEOPS_INGRESS_MAX_CONNECTIONS, SITEOPS_INGRESS_SHED_BUSY_AFTER", func(_ *Handler, r *http.Request) string {
		tc, ok := r.Context().Value(connKey{}).(*trackedConn)
		if !ok {
			return "the connection cap"
		}
		return fmt.Sprintf("%d connections open at once; one busy for %s may be closed for a new one", tc.l.max, tc.l.shedBusyAfter)
	}},
	"timestamp_outside_window": {"SITEOPS_REPLAY_WINDOW", func(h *Handler, _ *http.Request) string {
		return fmt.Sprintf("signatures at most %s from now", h.opts.Window)
	}},
	"body_not_allowed": {"", func(*Handler, *http.Request) string {
		return "no body on a route other than POST /webhooks[/receiver]"
	}},
}

// limitOf is the limit that refused r for reason, and the setting that
// moves it ("none" when no setting does); ok is false when no limit did.
func (h *Handler) limitOf(r *http.Request, reason string) (limit, setting string, ok bool) {
	l, ok := refusalLimits[reason]
	if !ok {
		return "", "", false
	}
	setting = l.setting
	if setting == "" {
		setting = "none"
	}
	return l.value(h, r), setting, true
}
