package nexus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"regexp"
	"strings"

	nexusrpc "github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/temporalnexus"
)

// Caller is who a request comes from: what the server establishes, and
// what the request asserts.
//
// The server establishes one thing, from Temporal 1.30 on: the Nexus
// endpoint the request was addressed to (Request.Endpoint in the worker's
// Nexus task, "supported from server version 1.30.0"). An operator
// creates each endpoint, one per partner, and decides who reaches it (its
// access policy on Temporal Cloud, the frontend's authorization
// self-hosted), so quotas and limits are keyed on it. Temporal 1.29 sends
// no endpoint, and neither does a request over the frontend's HTTP route
// that addresses the task queue's service directly.
//
// Everything else is what the caller sent: the frontend passes a request's
// headers and links on as they came (a Nexus-Link header over HTTP names
// any namespace and workflow it likes), and the server's own link for a
// calling workflow looks no different. So the namespace and workflow a
// request names go to logs and the run's memo, labelled as asserted, and
// never to a quota.
type Caller struct {
	// Endpoint is the Nexus endpoint the request was addressed to, as the
	// server names it (Temporal 1.30 and later); empty otherwise.
	Endpoint string
	// AssertedNamespace and AssertedWorkflowID are the calling
	// workflow's, from the first workflow-event link of the request;
	// empty for a request without one (plain HTTP, say).
	AssertedNamespace  string
	AssertedWorkflowID string
	UserAgent          string
	RequestID          string
}

// callerOf reads who a request comes from.
func callerOf(ctx context.Context, header nexusrpc.Header, links []nexusrpc.Link, requestID string) Caller {
	c := Caller{RequestID: clip(requestID), UserAgent: clip(header.Get("user-agent"))}
	if temporalnexus.IsNexusOperation(ctx) {
		c.Endpoint = temporalnexus.GetOperationInfo(ctx).Endpoint
	}
	for _, l := range links {
		if ev, err := temporalnexus.ConvertNexusLinkToLinkWorkflowEvent(l); err == nil && ev.GetNamespace() != "" {
			c.AssertedNamespace, c.AssertedWorkflowID = clip(ev.GetNamespace()), clip(ev.GetWorkflowId())
			break
		}
	}
	return c
}

// Identified reports whether the server named the request's endpoint.
func (c Caller) Identified() bool { return c.Endpoint != "" }

// unidentified is the key every request without an endpoint shares.
const unidentified = "nexus:unidentified"

// keyable is what an endpoint name may be to stand in a key as it is (the
// server's own rule for endpoint names is stricter).
var keyable = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`)

// Key is what the caller's text quota and running onboardings count
// against: its endpoint, or the one bucket of every request without one.
// It is the SiteopsCaller search attribute of the onboardings it starts,
// so it never holds a quote or anything else a visibility query would
// read as syntax.
func (c Caller) Key() string {
	switch {
	case c.Endpoint == "":
		return unidentified
	case keyable.MatchString(c.Endpoint):
		return "nexus:endpoint:" + c.Endpoint
	default:
		sum := sha256.Sum256([]byte(c.Endpoint))
		return "nexus:endpoint-sha256:" + hex.EncodeToString(sum[:16])
	}
}

// LogValue lets a Caller be logged as one group: the key it counts
// against, and what the request asserts, labelled so.
func (c Caller) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("key", c.Key())}
	if c.Endpoint != "" {
		attrs = append(attrs, slog.String("endpoint", clip(c.Endpoint)))
	}
	attrs = append(attrs, slog.String("asserted_namespace", orUnknown(c.AssertedNamespace)), slog.String("request_id", c.RequestID))
	if c.AssertedWorkflowID != "" {
		attrs = append(attrs, slog.String("asserted_workflow_id", c.AssertedWorkflowID))
	}
	if c.UserAgent != "" {
		attrs = append(attrs, slog.String("user_agent", c.UserAgent))
	}
	return slog.GroupValue(attrs...)
}

func orUnknown(s string) string {
	if s == "" {
		return "none given (not a workflow's request: plain HTTP?)"
	}
	return s
}

// clip keeps what a caller chose short enough for a log line.
func clip(s string) string {
	const most = 128
	s = strings.ToValidUTF8(s, "?")
	if len(s) > most {
		return s[:most] + "…"
	}
	return s
}
