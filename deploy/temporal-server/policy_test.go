package main

import (
	"context"
	"crypto/x509/pkix"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/authorization"
)

// env is a getenv over a map.
func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParsePolicy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    string // the policy's String, "" for none
		wantErr string
	}{
		{"unset: the upstream server", nil, "", ""},
		{"callers and types", map[string]string{SignalOnlyEnv: " siteops-ingress , edge ", StartTypesEnv: "LeadSync"},
			"certificates named edge, siteops-ingress may only signal (and start with a signal: LeadSync)", ""},
		{"callers only", map[string]string{SignalOnlyEnv: "siteops-ingress"}, "certificates named siteops-ingress may only signal (and start with a signal: none)", ""},
		{"an empty name", map[string]string{SignalOnlyEnv: "siteops-ingress,,x"}, "", `"" is not a name`},
		{"a name with a space first", map[string]string{SignalOnlyEnv: "siteops-ingress; rm"}, "", "is not a name"},
		{"types without callers", map[string]string{StartTypesEnv: "LeadSync"}, "", SignalOnlyEnv + " is not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePolicy(env(tc.env))
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("ParsePolicy = %v, %v; want an error naming %q", p, err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case tc.want == "" && p != nil:
				t.Errorf("ParsePolicy = %s, want none", p)
			case tc.want != "" && (p == nil || p.String() != tc.want):
				t.Errorf("ParsePolicy = %v, want %q", p, tc.want)
			}
		})
	}
}

// allowAll is the authorizer of a server configured without one.
type allowAll struct{ calls int }

func (a *allowAll) Authorize(context.Context, *authorization.Claims, *authorization.CallTarget) (authorization.Result, error) {
	a.calls++
	return authorization.Result{Decision: authorization.DecisionAllow}, nil
}

// TestSignalOnlyCallers checks what a caller whose certificate the policy
// names may call, and that every other caller, with a certificate or
// none, is left to the configuration's authorizer and mapper.
func TestSignalOnlyCallers(t *testing.T) {
	p, err := ParsePolicy(env(map[string]string{SignalOnlyEnv: "siteops-ingress", StartTypesEnv: "LeadSync"}))
	if err != nil {
		t.Fatal(err)
	}
	inner := &allowAll{}
	authz, mapper := p.Wrap(inner, authorization.NewNoopClaimMapper(), nil)
	claimsOf := func(cn string) *authorization.Claims {
		t.Helper()
		ai := &authorization.AuthInfo{}
		if cn != "" {
			ai.TLSSubject = &pkix.Name{CommonName: cn}
		}
		c, err := mapper.GetClaims(ai)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	start := func(typ string) any {
		return &workflowservice.SignalWithStartWorkflowExecutionRequest{WorkflowType: &commonpb.WorkflowType{Name: typ}}
	}
	const ws = workflowService
	for _, tc := range []struct {
		api     string
		req     any
		allowed bool
	}{
		{"/grpc.health.v1.Health/Check", nil, true},
		{ws + "GetSystemInfo", nil, true},
		{ws + "DescribeNamespace", nil, true},
		{ws + "SignalWorkflowExecution", nil, true},
		{ws + "SignalWithStartWorkflowExecution", start("LeadSync"), true},
		{ws + "SignalWithStartWorkflowExecution", start("EmbedIncident"), false},
		{ws + "SignalWithStartWorkflowExecution", nil, false},
		{ws + "StartWorkflowExecution", nil, false},
		{ws + "TerminateWorkflowExecution", nil, false},
		{ws + "RequestCancelWorkflowExecution", nil, false},
		{ws + "UpdateWorkflowExecution", nil, false},
		{ws + "ExecuteMultiOperation", nil, false},
		{ws + "DescribeWorkflowExecution", nil, false},
		{ws + "GetWorkflowExecutionHistory", nil, false},
		{ws + "PollWorkflowTaskQueue", nil, false},
		{ws + "DeleteNamespace", nil, false},
		{"/temporal.api.operatorservice.v1.OperatorService/AddSearchAttributes", nil, false},
		{"/temporal.server.api.adminservice.v1.AdminService/DescribeCluster", nil, false},
	} {
		r, err := authz.Authorize(t.Context(), claimsOf("siteops-ingress"), &authorization.CallTarget{APIName: tc.api, Namespace: "siteops", Request: tc.req})
		if err != nil || (r.Decision == authorization.DecisionAllow) != tc.allowed {
			t.Errorf("siteops-ingress calls %s (%v): %+v, %v; want allowed %t", tc.api, tc.req, r, err, tc.allowed)
		}
		if !tc.allowed && r.Reason == "" {
			t.Errorf("siteops-ingress's %s refused without a reason", tc.api)
		}
	}
	if inner.calls != 0 {
		t.Errorf("the configuration's authorizer was asked %d times about a signal-only caller; want never", inner.calls)
	}
	// Every other caller: the worker's certificate, none at all (a server
	// without mutual TLS), and a certificate whose name only contains the
	// signal-only one.
	for _, cn := range []string{"siteops", "", "siteops-ingress-2", "Siteops-Ingress"} {
		before := inner.calls
		r, err := authz.Authorize(t.Context(), claimsOf(cn), &authorization.CallTarget{APIName: ws + "TerminateWorkflowExecution", Namespace: "siteops"})
		if err != nil || r.Decision != authorization.DecisionAllow || inner.calls != before+1 {
			t.Errorf("a caller named %q terminating: %+v, %v; want the configuration's authorizer's answer", cn, r, err)
		}
	}
	if mapper.(authorization.ClaimMapperWithAuthInfoRequired).AuthInfoRequired() {
		t.Error("AuthInfoRequired is not the noop mapper's false: a server without mutual TLS would refuse every caller")
	}
}
