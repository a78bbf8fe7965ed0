// Package schemagen writes the JSON Schemas (draft 2020-12) of package
// schemas from the Go types that read and write the documents: reflect
// gives the shape (JSON names from the json tags; no other field is
// allowed), the list in required.go says which fields an input must hold,
// rules.go adds the rules a schema can state beyond the shape (lengths,
// limits, the shape of an origin, the values a field takes), and the
// types' and fields' doc comments give the descriptions. In an output
// every field Go always writes (no omitempty or omitzero) is required, so
// that a client generated from it need not guess. A type whose JSON is
// written by a method of its own is described by hand in special; any
// other such type is refused rather than guessed at.
package schemagen

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

// File is one schema file and the type it describes.
type File struct {
	Name  string
	Title string
	Type  reflect.Type
	// Output marks what siteops writes (a result, a query's answer, an
	// operation's output) rather than reads: every field Go always writes
	// is required.
	Output bool
}

func input[T any](name, title string) File { return File{name, title, reflect.TypeFor[T](), false} }

func output[T any](name, title string) File { return File{name, title, reflect.TypeFor[T](), true} }

// Files are the published schemas: everything a caller writes for siteops
// or reads from it. The relay's signals (knowledge-ready, site-status,
// leads-created, lead-created, verified-delivery) carry verified webhook
// deliveries and are not for callers to send, so they have none.
var Files = []File{
	input[starter.Spec]("onboarding-spec.schema.json", "siteops onboarding spec (siteops onboard -f)"),

	input[workflows.OnboardingInput]("onboarding-input.schema.json", "Input of the Onboarding workflow"),
	output[workflows.OnboardingResult]("onboarding-result.schema.json", "Result of the Onboarding workflow"),
	output[workflows.OnboardingStatus]("onboarding-status.schema.json", "Answer of the Onboarding workflow's status query"),
	input[workflows.LeadSyncInput]("lead-sync-input.schema.json", "Input of the LeadSync workflow"),
	output[workflows.LeadSyncProgress]("lead-sync-progress.schema.json", "Answer of the LeadSync workflow's progress query (the workflow has no result: it runs until cancelled)"),
	input[workflows.SyncRequest]("lead-sync-sync-signal.schema.json", "Argument of the LeadSync workflow's sync signal"),
	input[workflows.EmbedIncidentInput]("embed-incident-input.schema.json", "Input of the EmbedIncident workflow"),
	output[workflows.EmbedIncidentStatus]("embed-incident-status.schema.json", "Result of the EmbedIncident workflow, and the answer of its status query and decide update"),
	input[workflows.EmbedOffRequest]("embed-incident-await-off-update.schema.json", "Argument of the EmbedIncident workflow's await-off update"),
	output[workflows.EmbedOffResult]("embed-incident-await-off-result.schema.json", "Answer of the EmbedIncident workflow's await-off update"),
	input[workflows.EmbedDecision]("embed-incident-decide-update.schema.json", "Argument of the EmbedIncident workflow's decide update"),
	input[workflows.SecretRotationInput]("secret-rotation-input.schema.json", "Input of the SecretRotation workflow"),
	output[workflows.SecretRotationStatus]("secret-rotation-status.schema.json", "Result of the SecretRotation workflow, and the answer of its status query and decide update"),
	input[workflows.RotationDecision]("secret-rotation-decide-update.schema.json", "Argument of the SecretRotation workflow's decide update"),
	input[workflows.EndpointRegistrationInput]("endpoint-registration-input.schema.json", "Input of the EndpointRegistration workflow"),
	output[workflows.EndpointRegistrationStatus]("endpoint-registration-status.schema.json", "Result of the EndpointRegistration workflow, and the answer of its status query"),
	input[workflows.SecretReconcileInput]("secret-reconcile-input.schema.json", "Input of the SecretReconcile workflow (its schedule starts it)"),
	output[workflows.SecretReconcileStatus]("secret-reconcile-status.schema.json", "Result of the SecretReconcile workflow, and the answer of its status query"),
	input[workflows.LeadSweepInput]("lead-sweep-input.schema.json", "Input of the LeadSweep workflow (its schedule starts it; the fields carry a sweep across continue-as-new)"),
	output[workflows.LeadSweepStatus]("lead-sweep-status.schema.json", "Result of the LeadSweep workflow, and the answer of its status query"),
	input[workflows.LeadEventsInput]("lead-events-input.schema.json", "Input of the LeadEvents workflow (the relay starts it; the fields carry a shard across continue-as-new)"),
	output[workflows.LeadEventsStatus]("lead-events-status.schema.json", "Answer of the LeadEvents workflow's status query (the workflow has no result: it runs until cancelled)"),

	input[api.StoreKnowledgeInput]("nexus-store-knowledge-input.schema.json", "Input of the store-knowledge operation of siteops' Nexus service"),
	output[api.StoreKnowledgeOutput]("nexus-store-knowledge-output.schema.json", "Output of the store-knowledge operation of siteops' Nexus service"),
	input[api.OnboardInput]("nexus-onboard-input.schema.json", "Input of the onboard operation of siteops' Nexus service"),
	output[api.OnboardResult]("nexus-onboard-output.schema.json", "Output of the onboard operation of siteops' Nexus service (the Onboarding workflow's result)"),
	input[api.OnboardingStatusInput]("nexus-onboarding-status-input.schema.json", "Input of the onboarding-status operation of siteops' Nexus service"),
	output[api.Onboarding]("nexus-onboarding-status-output.schema.json", "Output of the onboarding-status operation of siteops' Nexus service"),
	input[api.LeadSyncStatusInput]("nexus-lead-sync-status-input.schema.json", "Input of the lead-sync-status operation of siteops' Nexus service"),
	output[api.LeadSyncProgress]("nexus-lead-sync-status-output.schema.json", "Output of the lead-sync-status operation of siteops' Nexus service"),
}

// durationPattern matches what time.ParseDuration reads without a sign:
// "90s", "1h30m", "1.5h", "0".
const durationPattern = `^(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`

// special describes the types whose JSON a method of their own writes.
var special = map[reflect.Type]func() object{
	reflect.TypeFor[workflows.Duration](): duration,
	reflect.TypeFor[api.Duration]():       duration,
	reflect.TypeFor[time.Time](): func() object {
		return object{{"type", "string"}, {"format", "date-time"}}
	},
	reflect.TypeFor[agentsite.Cursor](): func() object {
		return object{
			{"description", "An opaque position in a site's lead collection."},
			{"type", "object"},
			{"properties", object{{"site_id", object{{"type", "string"}}}, {"token", object{{"type", "string"}}}}},
			{"required", []string{"site_id", "token"}},
			{"additionalProperties", false},
		}
	},
}

func duration() object {
	return object{
		{"description", `A Go duration such as "90s", "10m" or "1h30m"; a number is read as seconds.`},
		{"type", []string{"string", "number"}},
		{"pattern", durationPattern},
		{"minimum", 0},
	}
}

// Render writes the schema of f, its doc comments read from the module
// at root.
func Render(root string, f File) ([]byte, error) {
	return render(root, f, map[reflect.Type]bool{})
}

// render is Render, and marks in described every struct type it describes.
func render(root string, f File, described map[reflect.Type]bool) ([]byte, error) {
	g := &generator{docs: newDocs(root), seen: map[reflect.Type]bool{}, described: described, output: f.Output}
	body, err := g.schema(f.Type, "")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	root0 := object{{"$schema", "https://json-schema.org/draft/2020-12/schema"}, {"title", f.Title}}
	if d := g.docs.of(f.Type, ""); d != "" {
		root0 = append(root0, kv{"description", d})
	}
	for _, p := range body {
		if p.k != "description" {
			root0 = append(root0, p)
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // descriptions say onboarding/<slug>
	enc.SetIndent("", "  ")
	if err := enc.Encode(root0); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

type generator struct {
	docs      *docs
	seen      map[reflect.Type]bool // struct types on the current path, against recursion
	described map[reflect.Type]bool // every struct type described, for All's check of required and rules
	output    bool                  // the file describes what siteops writes (File.Output)
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// schema describes t; desc is the description of the field of type t.
func (g *generator) schema(t reflect.Type, desc string) (object, error) {
	withDesc := func(o object) object {
		if desc == "" {
			return o
		}
		if len(o) > 0 && o[0].k == "description" {
			o = o[1:]
		}
		return append(object{{"description", desc}}, o...)
	}
	if t.Kind() == reflect.Pointer {
		o, err := g.schema(t.Elem(), desc)
		return nullable(o), err
	}
	if f, ok := special[t]; ok {
		o := f()
		if desc != "" && len(o) > 0 && o[0].k == "description" {
			// The field's own words first, then what the type's JSON is.
			desc = strings.TrimSuffix(desc, ".") + ". " + o[0].v.(string)
		}
		return withDesc(o), nil
	}
	if t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler) ||
		t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
		return nil, fmt.Errorf("%s writes its own JSON: describe it in special", t)
	}
	switch t.Kind() {
	case reflect.String:
		return withDesc(object{{"type", "string"}}), nil
	case reflect.Bool:
		return withDesc(object{{"type", "boolean"}}), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return withDesc(object{{"type", "integer"}}), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return withDesc(object{{"type", "integer"}, {"minimum", 0}}), nil
	case reflect.Float32, reflect.Float64:
		return withDesc(object{{"type", "number"}}), nil
	case reflect.Slice, reflect.Array:
		items, err := g.schema(t.Elem(), "")
		if err != nil {
			return nil, err
		}
		o := object{{"type", "array"}, {"items", items}}
		if t.Kind() == reflect.Slice {
			o = nullable(o) // a nil slice is written as null
		}
		return withDesc(o), nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: only maps with string keys are described", t)
		}
		values, err := g.schema(t.Elem(), "")
		if err != nil {
			return nil, err
		}
		return withDesc(nullable(object{{"type", "object"}, {"additionalProperties", values}})), nil
	case reflect.Struct:
		if desc == "" {
			desc = g.docs.of(t, "")
		}
		o, err := g.object(t)
		return withDesc(o), err
	}
	return nil, fmt.Errorf("%s: a %s cannot be described", t, t.Kind())
}

// object describes a struct: its exported fields by their JSON names, in
// declaration order.
func (g *generator) object(t reflect.Type) (object, error) {
	if g.seen[t] {
		return nil, fmt.Errorf("%s refers to itself", t)
	}
	g.seen[t] = true
	defer delete(g.seen, t)
	g.described[t] = true
	props := object{}
	names := map[string]bool{}
	var always []string // fields Go always writes, in declaration order
	var walk func(t reflect.Type) error
	walk = func(t reflect.Type) error {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" && opts == "" {
				continue
			}
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				if err := walk(f.Type); err != nil {
					return err
				}
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			s, err := g.schema(f.Type, g.docs.of(t, f.Name))
			if err != nil {
				return fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
			}
			if r, ok := rules[t][name]; ok {
				if s, err = r.apply(s); err != nil {
					return fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
				}
			}
			props = append(props, kv{name, s})
			names[name] = true
			if !strings.Contains(","+opts+",", ",omitempty,") && !strings.Contains(","+opts+",", ",omitzero,") {
				always = append(always, name)
			}
		}
		return nil
	}
	if err := walk(t); err != nil {
		return nil, err
	}
	for name := range rules[t] {
		if !names[name] {
			return nil, fmt.Errorf("%s: rules name %q, which is not one of its JSON fields", t, name)
		}
	}
	o := object{{"type", "object"}, {"properties", props}}
	if g.output {
		if len(always) > 0 {
			o = append(o, kv{"required", always})
		}
		return append(o, kv{"additionalProperties", false}), nil
	}
	if req := required[t]; len(req) > 0 {
		for _, name := range req {
			if !names[name] {
				return nil, fmt.Errorf("%s: required lists %q, which is not one of its JSON fields", t, name)
			}
		}
		o = append(o, kv{"required", req})
	}
	return append(o, kv{"additionalProperties", false}), nil
}

// nullable lets a schema's value also be null, as Go writes a nil slice,
// map or pointer.
func nullable(o object) object {
	out := make(object, len(o))
	copy(out, o)
	for i, p := range out {
		if p.k != "type" {
			continue
		}
		switch v := p.v.(type) {
		case string:
			out[i].v = []string{v, "null"}
		case []string:
			out[i].v = append(append([]string{}, v...), "null")
		}
	}
	return out
}

// object is a JSON object whose keys keep their order, so that a schema
// lists fields as the Go type declares them.
type object []kv

type kv struct {
	k string
	v any
}

// MarshalJSON implements json.Marshaler.
func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(p.k); err != nil {
			return nil, err
		}
		b.Truncate(b.Len() - 1) // Encode's newline
		b.WriteByte(':')
		if err := enc.Encode(p.v); err != nil {
			return nil, err
		}
		b.Truncate(b.Len() - 1)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
