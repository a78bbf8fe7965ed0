package nexus

import (
	"context"
	"log/slog"
	"strings"

	nexusrpc "github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/temporalnexus"
)

// Caller is who a request says it comes from. Nothing in a Nexus request
// authenticates its caller to the handler: Temporal decides who reaches
// the service at all (the endpoint's access policy on Temporal Cloud, the
// namespace's authorization self-hosted), and a request sent over the
// frontend's HTTP API may carry any header or link. So a Caller names a
// request in logs and quotas; it never grants anything.
type Caller struct {
	// Namespace and WorkflowID are the calling workflow's, from the link
	// Temporal attaches to a request made by a workflow; empty for a
	// request without one (plain HTTP, say).
	Namespace  string
	WorkflowID string
	// Endpoint is the Nexus endpoint the request was addressed to, when
	// the server says (Temporal 1.30 and later).
	Endpoint  string
	UserAgent string
	RequestID string
}

// callerOf reads who a request says it comes from.
func callerOf(ctx context.Context, header nexusrpc.Header, links []nexusrpc.Link, requestID string) Caller {
	c := Caller{RequestID: requestID, UserAgent: clip(header.Get("user-agent"))}
	if temporalnexus.IsNexusOperation(ctx) {
		c.Endpoint = temporalnexus.GetOperationInfo(ctx).Endpoint
	}
	for _, l := range links {
		if ev, err := temporalnexus.ConvertNexusLinkToLinkWorkflowEvent(l); err == nil && ev.GetNamespace() != "" {
			c.Namespace, c.WorkflowID = clip(ev.GetNamespace()), clip(ev.GetWorkflowId())
			break
		}
	}
	return c
}

// Key is what a per-caller quota counts against: the calling namespace,
// or "http" for requests that name none.
func (c Caller) Key() string {
	if c.Namespace == "" {
		return "nexus:http"
	}
	return "nexus:" + c.Namespace
}

// LogValue lets a Caller be logged as one group.
func (c Caller) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("namespace", orUnknown(c.Namespace)), slog.String("request_id", c.RequestID)}
	if c.WorkflowID != "" {
		attrs = append(attrs, slog.String("workflow_id", c.WorkflowID))
	}
	if c.Endpoint != "" {
		attrs = append(attrs, slog.String("endpoint", c.Endpoint))
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
