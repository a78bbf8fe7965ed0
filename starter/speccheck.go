package starter

import (
	"errors"

	"github.com/siteops/siteops/schemas"
	"github.com/siteops/siteops/workflows"
)

// CheckSpec prepares a spec as Prepare does and adds what the published
// schema (schemas/onboarding-spec.schema.json) finds in the document it
// was read from beyond the contract's rules: a spec without a site object,
// a null where a value belongs, a duration with a sign. It is what
// `siteops onboard` runs before it starts anything, dry run or not. The
// schema requires only what the contract's rules require (the schemas
// tests hold it to that), so Prepare keeps to the contract alone.
func CheckSpec(s Spec) (Prepared, []workflows.Problem) {
	p, problems := Prepare(s)
	return p, append(problems, s.schemaProblems(problems)...)
}

// ReadSpec loads the spec at path (LoadSpec; "-" is standard input) and
// checks it (CheckSpec): what `siteops onboard` starts from. The problems
// are those of a spec that cannot be read as an onboarding or that breaks
// a rule; the error is one that cannot be read at all.
func ReadSpec(path string) (Prepared, []workflows.Problem, error) {
	s, err := LoadSpec(path)
	var specErr *SpecError
	if errors.As(err, &specErr) {
		return Prepared{}, specErr.Problems, nil
	}
	if err != nil {
		return Prepared{}, nil, err
	}
	p, problems := CheckSpec(s)
	return p, problems, nil
}

// schemaProblems checks the spec's document against the published schema
// and returns what it finds that named, the field-by-field checks, did not
// already name; none for a spec that was not read from a document.
func (s Spec) schemaProblems(named []workflows.Problem) []workflows.Problem {
	if s.doc == nil {
		return nil
	}
	found, err := schemas.Validate(schemas.OnboardingSpec, s.doc)
	if err != nil {
		return nil // the document was read already; a schema that does not load fails the schemas tests
	}
	seen := map[string]bool{}
	for _, p := range named {
		seen[p.Field] = true
	}
	var out []workflows.Problem
	for _, p := range found {
		field := p.Field
		if field == "" {
			field = "(spec)"
		}
		if seen[field] {
			continue
		}
		seen[field] = true
		out = append(out, workflows.Problem{Field: field, Message: p.Message + " (schemas/" + schemas.OnboardingSpec + ")", Position: workflows.Position{Line: p.Line, Column: p.Column}})
	}
	return out
}
