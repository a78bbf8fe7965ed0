package main

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// connectionFlags are the flags every command that talks to Temporal takes
// (temporalFlags.register), winning over TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE and TEMPORAL_PROFILE.
var connectionFlags = []string{"address", "namespace", "profile"}

// TestTemporalCommandsTakeConnectionFlags walks the command tree and checks
// that every command that talks to Temporal takes --address, --namespace
// and --profile, and that no other command does (a flag that changes
// nothing misleads). Which commands talk to Temporal is read from the code,
// not from a list: the function that builds a command (found by its Short
// text) talks to Temporal when it reaches, through the functions and
// methods of this package it calls (commands built elsewhere aside), a
// function of package wiring that takes the Temporal settings
// (config.Temporal, or a config embedding it), or dials with the SDK's
// client package. A new subcommand is thus classified by what it does.
func TestTemporalCommandsTakeConnectionFlags(t *testing.T) {
	code := readCommandCode(t)
	var leaves []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		if !cmd.HasSubCommands() {
			leaves = append(leaves, cmd)
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(newCLI().root())

	talking := map[string]bool{}
	for _, cmd := range leaves {
		path := cmd.CommandPath()
		fn, err := code.builder(cmd)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		how := code.reachesTemporal(fn)
		var has, lacks []string
		for _, name := range connectionFlags {
			if cmd.Flag(name) != nil {
				has = append(has, "--"+name)
			} else {
				lacks = append(lacks, "--"+name)
			}
		}
		switch {
		case how != "" && len(lacks) > 0:
			t.Errorf("%s talks to Temporal (%s) but has no %s; call temporalFlags.register in %s", path, how, strings.Join(lacks, ", "), fn)
		case how == "" && len(has) > 0:
			t.Errorf("%s has %s but does not talk to Temporal (%s reaches no wiring function taking config.Temporal); drop the flags", path, strings.Join(has, ", "), fn)
		}
		talking[path] = how != ""
		t.Logf("%-24s built by %-22s talks to Temporal: %t %s", path, fn, how != "", how)
	}
	// The derivation must see the processes that obviously talk to
	// Temporal, or it sees nothing and the checks above pass vacuously.
	for _, path := range []string{"siteops worker", "siteops ingress"} {
		if !talking[path] {
			t.Errorf("%s is not found to talk to Temporal: the reading of the code above is broken", path)
		}
	}
	quiet := 0
	for _, v := range talking {
		if !v {
			quiet++
		}
	}
	if quiet == 0 {
		t.Errorf("every command is found to talk to Temporal (%v): the reading of the code above is broken", talking)
	}
}

// commandCode is what the test reads of this package's source and of
// package wiring.
type commandCode struct {
	funcs    map[string][]*ast.FuncDecl // by name; methods and functions alike
	builders map[string]bool            // functions that return a *cobra.Command
	// shorts maps each Short text of a cobra.Command literal to the
	// functions whose literal has it.
	shorts map[string][]string
	// sinks are the package-qualified functions that connect to Temporal
	// ("wiring.Starter", "client.Dial", ...), by the local name of their
	// package in this package's files.
	sinks map[string]bool
}

// readCommandCode parses the non-test files of this package and of package
// wiring.
func readCommandCode(t *testing.T) *commandCode {
	t.Helper()
	c := &commandCode{funcs: map[string][]*ast.FuncDecl{}, builders: map[string]bool{}, shorts: map[string][]string{}, sinks: map[string]bool{}}
	for _, f := range parseDir(t, ".") {
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := filepath.Base(path)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			switch path {
			case "github.com/siteops/siteops/wiring":
				for _, fn := range temporalFuncs(t) {
					c.sinks[name+"."+fn] = true
				}
			case "go.temporal.io/sdk/client":
				for _, fn := range []string{"Dial", "DialContext", "NewLazyClient", "NewClient"} {
					c.sinks[name+"."+fn] = true
				}
			}
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := fd.Name.Name
			c.funcs[name] = append(c.funcs[name], fd)
			if res := fd.Type.Results; res != nil && len(res.List) == 1 && isCobraCommand(res.List[0].Type) {
				c.builders[name] = true
			}
			for _, short := range commandShorts(fd) {
				c.shorts[short] = append(c.shorts[short], name)
			}
		}
	}
	if len(c.sinks) == 0 {
		t.Fatal("no file of this package imports package wiring: the reading of the code is broken")
	}
	return c
}

func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name) //nolint:gosec // this package's own sources
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return files
}

// temporalFuncs returns the exported functions of package wiring that take
// the Temporal settings: a config.Temporal parameter (or pointer), or a
// parameter of a wiring struct type that embeds config.Temporal.
func temporalFuncs(t *testing.T) []string {
	t.Helper()
	files := parseDir(t, filepath.Join("..", "..", "wiring"))
	isTemporal := func(e ast.Expr) bool {
		if s, ok := e.(*ast.StarExpr); ok {
			e = s.X
		}
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		x, ok := sel.X.(*ast.Ident)
		return ok && x.Name == "config" && sel.Sel.Name == "Temporal"
	}
	embedding := map[string]bool{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			if st, ok := ts.Type.(*ast.StructType); ok {
				for _, field := range st.Fields.List {
					if len(field.Names) == 0 && isTemporal(field.Type) {
						embedding[ts.Name.Name] = true
					}
				}
			}
			return false
		})
	}
	var out []string
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !fd.Name.IsExported() {
				continue
			}
			for _, p := range fd.Type.Params.List {
				typ := p.Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				id, _ := typ.(*ast.Ident)
				if isTemporal(p.Type) || (id != nil && embedding[id.Name]) {
					out = append(out, fd.Name.Name)
					break
				}
			}
		}
	}
	if !slices.Contains(out, "DialTemporal") {
		t.Fatalf("wiring.DialTemporal is not found among the functions taking config.Temporal (%v): the reading of package wiring is broken", out)
	}
	return out
}

func isCobraCommand(e ast.Expr) bool {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == "cobra" && sel.Sel.Name == "Command"
}

// commandShorts returns the Short texts of the cobra.Command literals in
// fd: a string literal, or a local variable set from string literals.
func commandShorts(fd *ast.FuncDecl) []string {
	var out []string
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok || !isCobraCommand(lit.Type) {
			return true
		}
		for _, el := range lit.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if key, _ := kv.Key.(*ast.Ident); !ok || key == nil || key.Name != "Short" {
				continue
			}
			switch v := kv.Value.(type) {
			case *ast.BasicLit:
				if s, err := strconv.Unquote(v.Value); err == nil {
					out = append(out, s)
				}
			case *ast.Ident:
				out = append(out, assignedStrings(fd, v.Name)...)
			}
		}
		return true
	})
	return out
}

// assignedStrings returns the string literals assigned to the variable
// name in fd.
func assignedStrings(fd *ast.FuncDecl, name string) []string {
	var out []string
	add := func(lhs []ast.Expr, rhs []ast.Expr) {
		for i, l := range lhs {
			if id, ok := l.(*ast.Ident); ok && id.Name == name && i < len(rhs) {
				if lit, ok := rhs[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						out = append(out, s)
					}
				}
			}
		}
	}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.AssignStmt:
			add(s.Lhs, s.Rhs)
		case *ast.ValueSpec:
			lhs := make([]ast.Expr, len(s.Names))
			for i, id := range s.Names {
				lhs[i] = id
			}
			add(lhs, s.Values)
		}
		return true
	})
	return out
}

// builder returns the name of the function that builds cmd, found by its
// Short text.
func (c *commandCode) builder(cmd *cobra.Command) (string, error) {
	fns := slices.Compact(slices.Sorted(slices.Values(c.shorts[cmd.Short])))
	switch len(fns) {
	case 1:
		return fns[0], nil
	case 0:
		return "", errors.New("cannot tell which function builds it: keep its Short a string literal (or a local variable set from literals) in the cobra.Command literal of the function that builds it")
	}
	return "", fmt.Errorf("its Short %q is built by %v; make it unique", cmd.Short, fns)
}

// reachesTemporal returns how the function name reaches Temporal ("via
// withStarter → wiring.Starter"), or "" when it does not. It follows the
// functions and methods of this package that name's body (closures
// included) refers to, except other command builders.
func (c *commandCode) reachesTemporal(name string) string {
	type step struct{ name, path string }
	seen := map[string]bool{name: true}
	queue := []step{{name, name}}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, fd := range c.funcs[s.name] {
			var found string
			var next []string
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if found != "" {
					return false
				}
				switch e := n.(type) {
				case *ast.SelectorExpr:
					if x, ok := e.X.(*ast.Ident); ok && c.sinks[x.Name+"."+e.Sel.Name] {
						found = x.Name + "." + e.Sel.Name
						return false
					}
				case *ast.Ident:
					// A local variable of the same name as a function is
					// not a reference to it; a name declared in another
					// file of the package is unresolved (nil Obj).
					if e.Obj != nil && e.Obj.Kind != ast.Fun {
						return true
					}
					if _, ok := c.funcs[e.Name]; ok && !c.builders[e.Name] && !seen[e.Name] {
						seen[e.Name] = true
						next = append(next, e.Name)
					}
				}
				return true
			})
			if found != "" {
				return s.path + " → " + found
			}
			for _, n := range next {
				queue = append(queue, step{n, s.path + " → " + n})
			}
		}
	}
	return ""
}
