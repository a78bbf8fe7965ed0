package nexus

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/siteops/siteops/codec"
)

// plaintextFields is every JSON field of the types Plaintext lists, nested
// ones as parent.child. A field added to one of those types is written in
// plaintext into siteops' histories and the callers' answers: add it here
// only once you have checked that anyone may read it.
var plaintextFields = map[string][]string{
	"api.StoreKnowledgeOutput": {"chars", "text_hash"},
	"api.OnboardResult":        {"faq_ids", "knowledge_ids", "knowledge_ready", "knowledge_timed_out", "site_id", "status"},
	"api.Onboarding": {
		"closed_at",
		"failure", "failure.code", "failure.message", "failure.request_id", "failure.status", "failure.type",
		"progress", "progress.error", "progress.faqs_added", "progress.knowledge_added", "progress.knowledge_ready",
		"progress.knowledge_total", "progress.last_site_event", "progress.site_id", "progress.step",
		"result", "result.faq_ids", "result.knowledge_ids", "result.knowledge_ready", "result.knowledge_timed_out", "result.site_id", "result.status",
		"run_id", "started_at", "status", "workflow_id",
	},
	"api.LeadSyncProgress":       {"caught_up", "duplicate_events", "events", "last_sync_at", "leads", "leads_read", "pages", "runs", "syncing", "syncs"},
	"workflows.OnboardingResult": {"faq_ids", "knowledge_ids", "knowledge_ready", "knowledge_timed_out", "site_id", "status"},
}

func TestPlaintextTypesHoldOnlyTheirKnownFields(t *testing.T) {
	var names []string
	for _, v := range Plaintext() {
		typ := reflect.TypeOf(v)
		name := typ.String()
		names = append(names, name)
		want, ok := plaintextFields[name]
		if !ok {
			t.Errorf("%s crosses the Nexus boundary in plaintext but plaintextFields does not list its fields", name)
			continue
		}
		if got := jsonFields(typ, ""); !slices.Equal(got, want) {
			t.Errorf("%s's fields are %v, want %v: a field written in plaintext changed; check that anyone may read it, then update plaintextFields", name, got, want)
		}
	}
	for name := range plaintextFields {
		if !slices.Contains(names, name) {
			t.Errorf("plaintextFields lists %s, which Plaintext does not", name)
		}
	}
}

// jsonFields is the sorted JSON field names of a struct type, with those of
// nested structs (other than times) as parent.child.
func jsonFields(typ reflect.Type, prefix string) []string {
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			name = f.Name
		}
		out = append(out, prefix+name)
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]() {
			out = append(out, jsonFields(ft, prefix+name+".")...)
		}
	}
	slices.Sort(out)
	return out
}

// TestAnswersAreReadWithoutTheKey writes each answer as the worker's data
// converter does and reads it with a converter that has no key.
func TestAnswersAreReadWithoutTheKey(t *testing.T) {
	c, err := codec.New(codec.Options{Keys: [][]byte{[]byte("0123456789abcdef0123456789abcdef")}, Namespace: "siteops", Plaintext: Plaintext()})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range Plaintext() {
		p, err := c.DataConverter().ToPayload(v)
		if err != nil {
			t.Fatal(err)
		}
		back := reflect.New(reflect.TypeOf(v))
		if err := converter.GetDefaultDataConverter().FromPayload(p, back.Interface()); err != nil {
			t.Errorf("%T read without the key: %v", v, err)
		}
	}
}
