package starter

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/siteops/siteops/workflows"
)

// TestResultSummary words a completed run's result read from its history:
// an onboarding's by its result type, another kind's by its status type,
// anything else as it is.
func TestResultSummary(t *testing.T) {
	raw := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rotation := workflows.SecretRotationStatus{Step: workflows.RotationDone, OldEndpointID: "we_1", NewEndpointID: "we_2"}
	for _, tc := range []struct {
		name string
		st   Status
		want []string
	}{
		{"no result", Status{Type: workflows.OnboardingWorkflowName}, nil},
		{"an onboarding", Status{Type: workflows.OnboardingWorkflowName, Result: raw(workflows.OnboardingResult{SiteID: "site_1", Status: "published", KnowledgeIDs: []string{"k_1", "k_2"}})},
			[]string{"result (from history): site site_1 is published (knowledge k_1, k_2; FAQs none)"}},
		{"a rotation", Status{Type: workflows.SecretRotationKind.Name, Result: raw(rotation)},
			append([]string{"result (from history): " + rotation.Summary()[0]}, rotation.Summary()[1:]...)},
		{"an unknown type", Status{Type: "Other", Result: json.RawMessage(`{"x":1}`)}, []string{`result (from history): {"x":1}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.st.ResultSummary(); !slices.Equal(got, tc.want) {
				t.Errorf("ResultSummary =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
