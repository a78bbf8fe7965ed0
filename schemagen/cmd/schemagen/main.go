// Command schemagen writes the JSON Schemas of package schemas from the Go types:
// `go generate ./schemas` runs it.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/siteops/siteops/schemagen"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "schemas:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := schemagen.ModuleRoot()
	if err != nil {
		return err
	}
	files, err := schemagen.All(root)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "schemas")
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(dir, name), files[name], 0o644); err != nil { //nolint:gosec // published files, readable by all
			return err
		}
		fmt.Println("wrote schemas/" + name)
	}
	// A schema no longer generated would linger, published but untested.
	old, err := filepath.Glob(filepath.Join(dir, "*.schema.json"))
	if err != nil {
		return err
	}
	for _, path := range old {
		if _, ok := files[filepath.Base(path)]; !ok {
			if err := os.Remove(path); err != nil {
				return err
			}
			fmt.Println("removed schemas/" + filepath.Base(path))
		}
	}
	return nil
}
