package generate

import (
	"errors"
	"os"
	"path/filepath"
)

// All renders every schema file, by name.
func All(root string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, f := range Files {
		b, err := Render(root, f)
		if err != nil {
			return nil, err
		}
		out[f.Name] = b
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
