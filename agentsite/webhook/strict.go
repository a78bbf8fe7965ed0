package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// envelopeFields are the envelope's keys, spelled as the contract spells
// them.
var envelopeFields = []string{"id", "type", "created_at", "data"}

// dataFields are the keys of data that siteops reads (LeadCreatedData and
// the relay's routing): a case variant of one of them is refused, since
// encoding/json would read it as the field.
var dataFields = []string{"site_id", "lead_id", "knowledge_id", "status"}

// DecodeEnvelope decodes a verified body strictly and checks its id and
// type. encoding/json matches keys case-insensitively and lets the last of
// duplicate keys win, so a body with "id" and "ID", or two "id", could mean
// one event to siteops and another to anything else that reads it. Before
// decoding, every object of the body is walked: two keys that are equal or
// differ only in case are refused, and so is a key of the envelope or of
// its data that siteops reads which is spelled in another case ("ID").
// Errors wrap ErrMalformedBody.
func DecodeEnvelope(body []byte) (Envelope, error) {
	if err := checkKeys(body); err != nil {
		return Envelope{}, fmt.Errorf("%w: %w", ErrMalformedBody, err)
	}
	var env Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return Envelope{}, fmt.Errorf("%w: %w", ErrMalformedBody, err)
	}
	if err := env.Validate(); err != nil {
		return Envelope{}, fmt.Errorf("%w: %w", ErrMalformedBody, err)
	}
	return env, nil
}

// checkKeys walks the JSON value in body token by token and refuses
// duplicate and case-variant keys in every object, and case variants of
// the keys siteops reads at the top level and in data.
func checkKeys(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("the body is not a JSON object")
	}
	if err := walkObject(dec, envelopeFields, "", 1); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the envelope object")
	}
	return nil
}

// maxDepth bounds the nesting walked (encoding/json refuses deeper
// bodies as well).
const maxDepth = 10000

// walkObject reads the members of an object whose '{' was read, up to and
// including its '}'. exact are keys that must be spelled exactly so.
func walkObject(dec *json.Decoder, exact []string, path string, depth int) error {
	if depth > maxDepth {
		return errors.New("nested too deeply")
	}
	seen := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return errors.New("an object key is not a string")
		}
		folded := foldKey(key)
		if prev, dup := seen[folded]; dup {
			if prev == key {
				return fmt.Errorf("key %q appears twice in %s", clip(key), where(path))
			}
			return fmt.Errorf("keys %q and %q of %s differ only in case", clip(prev), clip(key), where(path))
		}
		seen[folded] = key
		for _, want := range exact {
			if key != want && folded == foldKey(want) {
				return fmt.Errorf("key %q of %s must be spelled %q", clip(key), where(path), want)
			}
		}
		var inner []string
		if path == "" && key == "data" {
			inner = dataFields
		}
		if err := walkValue(dec, inner, path+"."+key, depth); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

// walkValue reads one value, walking the objects in it.
func walkValue(dec *json.Decoder, exact []string, path string, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '{':
		return walkObject(dec, exact, path, depth+1)
	case '[':
		for dec.More() {
			if err := walkValue(dec, nil, path+"[]", depth+1); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ']'
		return err
	}
	return fmt.Errorf("unexpected %v", d)
}

// foldKey is the form under which encoding/json matches a key to a field:
// simple case folding, so that the Kelvin sign matches k and the long s
// matches s as they do there.
func foldKey(k string) string {
	return strings.Map(func(r rune) rune { return unicode.ToUpper(unicode.ToLower(r)) }, k)
}

// clip shortens a key for an error message: keys come from the sender.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func where(path string) string {
	if path == "" {
		return "the envelope"
	}
	return clip(strings.TrimPrefix(path, "."))
}
