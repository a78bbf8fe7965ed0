package schemagen

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
)

// All renders every schema file, by name. An entry of required for a type
// no schema describes is an error: it would be a rule that reaches no one.
func All(root string) (map[string][]byte, error) {
	out := map[string][]byte{}
	described := map[reflect.Type]bool{}
	for _, f := range Files {
		b, err := render(root, f, described)
		if err != nil {
			return nil, err
		}
		out[f.Name] = b
	}
	for t := range required {
		if !described[t] {
			return nil, fmt.Errorf("required lists fields of %s, which no schema describes; remove the entry", t)
		}
	}
	for t := range rules {
		if !described[t] {
			return nil, fmt.Errorf("rules name fields of %s, which no schema describes; remove the entry", t)
		}
	}
	return out, nil
}

// ModuleRoot finds the directory of go.mod from the working directory up.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
