package main

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// The settings of the signal-only policy, read from the environment of
// every service (only the frontend checks calls).
const (
	// SignalOnlyEnv lists the certificate common names that may only
	// signal: siteops' ingress, whose process faces the internet.
	SignalOnlyEnv = "SITEOPS_TEMPORAL_SIGNAL_ONLY"
	// StartTypesEnv lists the workflow types those callers may start with
	// a signal (SignalWithStart): the relay's lead syncs.
	StartTypesEnv = "SITEOPS_TEMPORAL_SIGNAL_START_TYPES"
)

const workflowService = "/temporal.api.workflowservice.v1.WorkflowService/"

// signalOnlyAPIs are the calls a signal-only caller may make besides the
// health checks (authorization.IsHealthCheckAPI: the gRPC health check and
// GetSystemInfo, which every SDK client makes first): the namespace check
// of siteops doctor and of the ingress's readiness, and the relay's
// signals. SignalWithStart is checked apart, by workflow type.
var signalOnlyAPIs = map[string]bool{
	workflowService + "DescribeNamespace":       true,
	workflowService + "SignalWorkflowExecution": true,
}

// Policy keeps the callers whose client certificate names one of its
// common names to signals: they may signal any workflow, start one of
// its types with a signal, and make the checks an SDK client makes;
// every other call is refused (PermissionDenied). Every other caller is
// left to the authorizer and claim mapper of the server's configuration
// (global.authorization; by default none, which allows every call), so
// that the policy only ever takes away.
type Policy struct {
	signalOnly map[string]bool
	startTypes map[string]bool
}

// signalOnlyCaller is the claims' Extensions of a signal-only caller: the
// common name of its certificate.
type signalOnlyCaller struct{ commonName string }

// name is what a common name or a workflow type may be: no spaces or
// commas, which the lists separate.
var name = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9 ._:@/-]*$`)

// ParsePolicy reads the policy's lists, as getenv gives them: names
// separated by commas. It returns nil when SignalOnlyEnv is empty (no
// caller is kept to signals), and refuses a list with an empty or
// malformed name, and start types without signal-only callers.
func ParsePolicy(getenv func(string) string) (*Policy, error) {
	signalOnly, err := list(getenv, SignalOnlyEnv)
	if err != nil {
		return nil, err
	}
	startTypes, err := list(getenv, StartTypesEnv)
	if err != nil {
		return nil, err
	}
	if len(signalOnly) == 0 {
		if len(startTypes) > 0 {
			return nil, fmt.Errorf("%s is set and %s is not: name the certificate common names that may start those types (e.g. %s=siteops-ingress)", StartTypesEnv, SignalOnlyEnv, SignalOnlyEnv)
		}
		return nil, nil
	}
	return &Policy{signalOnly: signalOnly, startTypes: startTypes}, nil
}

// list reads one comma-separated list of names.
func list(getenv func(string) string, key string) (map[string]bool, error) {
	v := strings.TrimSpace(getenv(key))
	if v == "" {
		return nil, nil
	}
	out := map[string]bool{}
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if !name.MatchString(n) {
			return nil, fmt.Errorf("%s=%q: %q is not a name (letters, digits, and . _ : @ / - after the first); separate names with commas", key, v, n)
		}
		out[n] = true
	}
	return out, nil
}

// String says what the policy allows, for the server's log.
func (p *Policy) String() string {
	types := "none"
	if len(p.startTypes) > 0 {
		types = strings.Join(sortedKeys(p.startTypes), ", ")
	}
	return fmt.Sprintf("certificates named %s may only signal (and start with a signal: %s)", strings.Join(sortedKeys(p.signalOnly), ", "), types)
}

func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }

// Wrap returns the claim mapper and the authorizer of a server that keeps
// the policy: inner's, with the signal-only callers taken out. logger (may
// be nil) receives the refusals.
func (p *Policy) Wrap(inner authorization.Authorizer, innerMapper authorization.ClaimMapper, logger log.Logger) (authorization.Authorizer, authorization.ClaimMapper) {
	return &authorizer{policy: p, inner: inner, log: logger}, &claimMapper{signalOnly: p.signalOnly, inner: innerMapper}
}

// authorizer decides a signal-only caller's calls by the policy and leaves
// every other call to inner, the configuration's authorizer.
type authorizer struct {
	policy *Policy
	inner  authorization.Authorizer
	log    log.Logger
}

// claimMapper names a signal-only caller by its certificate, and leaves
// every other caller to the configuration's mapper.
type claimMapper struct {
	signalOnly map[string]bool
	inner      authorization.ClaimMapper
}

func (m *claimMapper) GetClaims(ai *authorization.AuthInfo) (*authorization.Claims, error) {
	if ai != nil && ai.TLSSubject != nil && m.signalOnly[ai.TLSSubject.CommonName] {
		cn := ai.TLSSubject.CommonName
		return &authorization.Claims{Subject: cn, Extensions: signalOnlyCaller{commonName: cn}}, nil
	}
	return m.inner.GetClaims(ai)
}

// AuthInfoRequired is the configuration mapper's: the noop mapper (no
// authorization configured) is asked even for a caller without a
// certificate or token, and gives it every permission, as the server
// without this policy does.
func (m *claimMapper) AuthInfoRequired() bool {
	if r, ok := m.inner.(authorization.ClaimMapperWithAuthInfoRequired); ok {
		return r.AuthInfoRequired()
	}
	return true
}

// Authorize decides a signal-only caller's call, and leaves every other
// call to the configuration's authorizer.
func (a *authorizer) Authorize(ctx context.Context, claims *authorization.Claims, target *authorization.CallTarget) (authorization.Result, error) {
	caller, ok := signalOnlyOf(claims)
	if !ok {
		return a.inner.Authorize(ctx, claims, target)
	}
	if reason := a.policy.refusal(target); reason != "" {
		if a.log != nil {
			a.log.Warn("Refused a call of a signal-only caller.", tag.NewStringTag("caller", caller.commonName),
				tag.NewStringTag("api", target.APIName), tag.WorkflowNamespace(target.Namespace), tag.NewStringTag("reason", reason))
		}
		return authorization.Result{Decision: authorization.DecisionDeny, Reason: reason}, nil
	}
	return authorization.Result{Decision: authorization.DecisionAllow}, nil
}

// signalOnlyOf returns the signal-only caller the claims name, if any.
func signalOnlyOf(claims *authorization.Claims) (signalOnlyCaller, bool) {
	if claims == nil {
		return signalOnlyCaller{}, false
	}
	c, ok := claims.Extensions.(signalOnlyCaller)
	return c, ok
}

// refusal says why a signal-only caller may not make the call; empty when
// it may.
func (p *Policy) refusal(target *authorization.CallTarget) string {
	api := target.APIName
	if authorization.IsHealthCheckAPI(api) || signalOnlyAPIs[api] {
		return ""
	}
	if api == workflowService+"SignalWithStartWorkflowExecution" {
		req, _ := target.Request.(*workflowservice.SignalWithStartWorkflowExecutionRequest)
		typ := req.GetWorkflowType().GetName()
		if p.startTypes[typ] {
			return ""
		}
		if len(p.startTypes) == 0 {
			return fmt.Sprintf("a signal-only caller may not start workflows (%q) with a signal: %s names no type", typ, StartTypesEnv)
		}
		return fmt.Sprintf("a signal-only caller may start only %s with a signal, not %q", strings.Join(sortedKeys(p.startTypes), ", "), typ)
	}
	return "a signal-only caller may only signal"
}
