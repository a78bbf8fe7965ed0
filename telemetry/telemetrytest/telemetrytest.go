// Package telemetrytest reads metrics in tests: the value of one sample of
// a registry, and the families of a /metrics text checked against the
// project's conventions (counters exported as counters, label values
// without spaces). It does not start or stop telemetry.
package telemetrytest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Value is the value of the counter or gauge sample name{labels} in g,
// labels given as name, value pairs and matched exactly (a label with an
// empty value matches an absent one, as Prometheus has it); 0 when there is
// no such sample, as for a counter not yet incremented.
func Value(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	return value(t, mfs, name, labels)
}

// Families parses a /metrics text in Prometheus format, by family name.
func Families(t testing.TB, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return mfs
}

// ValueIn is Value over parsed families.
func ValueIn(t testing.TB, mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	list := make([]*dto.MetricFamily, 0, len(mfs))
	for _, mf := range mfs {
		list = append(list, mf)
	}
	return value(t, list, name, labels)
}

func value(t testing.TB, mfs []*dto.MetricFamily, name string, labels []string) float64 {
	t.Helper()
	if len(labels)%2 != 0 {
		t.Fatalf("labels of %s are not name, value pairs: %q", name, labels)
	}
	want := map[string]string{}
	for i := 0; i < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !sameLabels(m.GetLabel(), want) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Untyped != nil:
				return m.GetUntyped().GetValue()
			}
			t.Fatalf("%s is a %s, not a counter or gauge", name, mf.GetType())
		}
	}
	return 0
}

func sameLabels(got []*dto.LabelPair, want map[string]string) bool {
	n := 0
	for _, l := range got {
		if l.GetValue() == "" {
			continue
		}
		if want[l.GetName()] != l.GetValue() {
			return false
		}
		n++
	}
	for _, v := range want {
		if v != "" {
			n--
		}
	}
	return n == 0
}

// Problems lists what in mfs breaks the project's conventions: a family
// whose name ends in _total that is not a counter (an SDK counter exported
// as a gauge), and a label value with white space or none printable.
func Problems(mfs map[string]*dto.MetricFamily) []string {
	var out []string
	for name, mf := range mfs {
		if strings.HasSuffix(name, "_total") && mf.GetType() != dto.MetricType_COUNTER {
			out = append(out, fmt.Sprintf("%s is TYPE %s, want counter", name, strings.ToLower(mf.GetType().String())))
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.ContainsFunc(l.GetValue(), func(r rune) bool { return r <= ' ' || r == 0x7f }) {
					out = append(out, fmt.Sprintf("%s{%s=%q}: the label value has white space", name, l.GetName(), l.GetValue()))
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Type is the TYPE of the family name in mfs, lower case as in the text
// ("counter", "gauge", "histogram"), or "" when there is none.
func Type(mfs map[string]*dto.MetricFamily, name string) string {
	mf, ok := mfs[name]
	if !ok {
		return ""
	}
	return strings.ToLower(mf.GetType().String())
}
