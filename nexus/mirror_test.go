package nexus

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/siteops/siteops/duration"
	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

// TestAPITypesMirrorTheWorkflowTypes keeps package api, which callers
// import without siteops, in step with the types the workflows read and
// write: a value with every field set goes through the mirror and back
// (unknown fields refused) and writes the same JSON.
func TestAPITypesMirrorTheWorkflowTypes(t *testing.T) {
	for _, pair := range []struct{ siteops, mirror any }{
		{workflows.OnboardingInput{}, api.OnboardInput{}},
		{workflows.OnboardingResult{}, api.OnboardResult{}},
		{workflows.OnboardingStatus{}, api.OnboardingProgress{}},
		{starter.Failure{}, api.Failure{}},
		{workflows.LeadSyncProgress{}, api.LeadSyncProgress{}},
		{workflows.Duration(0), api.Duration(0)},
	} {
		for _, dir := range [][2]reflect.Type{
			{reflect.TypeOf(pair.siteops), reflect.TypeOf(pair.mirror)},
			{reflect.TypeOf(pair.mirror), reflect.TypeOf(pair.siteops)},
		} {
			from := filled(dir[0]).Interface()
			to := reflect.New(dir[1])
			if err := convert(from, to.Interface()); err != nil {
				t.Errorf("%s → %s: %v", dir[0], dir[1], err)
				continue
			}
			want, _ := json.Marshal(from)
			got, _ := json.Marshal(to.Elem().Interface())
			var w, g any
			_ = json.Unmarshal(want, &w)
			_ = json.Unmarshal(got, &g)
			if !reflect.DeepEqual(w, g) {
				t.Errorf("%s → %s:\n got %s\nwant %s", dir[0], dir[1], got, want)
			}
		}
	}
	if api.ErrTypeInvalidSpec != workflows.ErrTypeInvalidSpec {
		t.Errorf("api.ErrTypeInvalidSpec = %q, the workflow fails with %q", api.ErrTypeInvalidSpec, workflows.ErrTypeInvalidSpec)
	}
	if api.ServiceName == "" || api.Onboard.Name() != api.OnboardName {
		t.Error("the operation references do not carry their names")
	}
}

// TestAPIDurationIsSiteopsDuration checks that api.Duration, which package
// api keeps to itself so that callers import nothing of siteops, reads and
// writes JSON exactly as siteops' duration.Duration does: the same values,
// the same refusals.
func TestAPIDurationIsSiteopsDuration(t *testing.T) {
	for _, in := range []string{`"90s"`, `"10m"`, `"1h30m"`, `"1.5h"`, `"300ms"`, `"-5m"`, `"0"`, `1.5`, `0`, `-2`, `90`,
		`"ninety"`, `"5 min"`, `""`, `true`, `null`, `{}`, `"10"`} {
		var want duration.Duration
		wantErr := json.Unmarshal([]byte(in), &want)
		var got api.Duration
		gotErr := json.Unmarshal([]byte(in), &got)
		if (gotErr == nil) != (wantErr == nil) || got.D() != want.D() {
			t.Errorf("%s: api.Duration reads %s (%v), duration.Duration %s (%v)", in, got, gotErr, want, wantErr)
		}
		if wantErr != nil {
			continue
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if string(g) != string(w) || got.String() != want.String() {
			t.Errorf("%s: api.Duration writes %s (%s), duration.Duration %s (%s)", in, g, got, w, want)
		}
	}
}

// filled returns a value of t with every field set.
func filled(t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	switch t {
	case reflect.TypeFor[workflows.Duration]():
		v.Set(reflect.ValueOf(workflows.Duration(90 * time.Second)))
		return v
	case reflect.TypeFor[api.Duration]():
		v.Set(reflect.ValueOf(api.Duration(90 * time.Second)))
		return v
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
		return v
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Slice:
		v.Set(reflect.Append(reflect.MakeSlice(t, 0, 1), filled(t.Elem())))
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		p.Elem().Set(filled(t.Elem()))
		v.Set(p)
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				v.Field(i).Set(filled(t.Field(i).Type))
			}
		}
	}
	return v
}
