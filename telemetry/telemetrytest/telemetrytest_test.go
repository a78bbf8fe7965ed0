package telemetrytest

import (
	"slices"
	"testing"
)

func TestProblemsAndValues(t *testing.T) {
	text := `# TYPE temporal_request gauge
temporal_request{operation="Poll"} 3
# TYPE a_total gauge
a_total 1
# TYPE b_total counter
b_total{outcome="accepted",reason=""} 2
b_total{outcome="rejected",reason="invalid signature"} 1
`
	mfs := Families(t, text)
	want := []string{
		`a_total is TYPE gauge, want counter`,
		`b_total{reason="invalid signature"}: the label value has white space`,
	}
	if got := Problems(mfs); !slices.Equal(got, want) {
		t.Errorf("Problems = %q, want %q", got, want)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"b_total", []string{"outcome", "accepted"}, 2},
		{"b_total", []string{"outcome", "accepted", "reason", ""}, 2},
		{"b_total", []string{"outcome", "rejected", "reason", "invalid signature"}, 1},
		{"b_total", []string{"outcome", "rejected"}, 0},
		{"b_total", nil, 0},
		{"temporal_request", []string{"operation", "Poll"}, 3},
		{"missing", nil, 0},
	} {
		if got := ValueIn(t, mfs, c.name, c.labels...); got != c.want {
			t.Errorf("%s%q = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := Type(mfs, "temporal_request"); got != "gauge" {
		t.Errorf("Type(temporal_request) = %q", got)
	}
}
