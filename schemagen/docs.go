package schemagen

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
)

// module is the path of the module whose sources hold the doc comments.
const module = "github.com/siteops/siteops"

// docs reads the doc comments of struct types and their fields from the
// module's sources, a package at a time.
type docs struct {
	root     string
	comments map[string]string // "pkg.Type" and "pkg.Type.Field" → text
	read     map[string]bool   // packages read
}

func newDocs(root string) *docs {
	return &docs{root: root, comments: map[string]string{}, read: map[string]bool{}}
}

// of returns the doc comment of type t, or of its field when field is
// not empty, as one paragraph; empty outside the module.
func (d *docs) of(t reflect.Type, field string) string {
	pkg := t.PkgPath()
	if pkg != module && !strings.HasPrefix(pkg, module+"/") {
		return ""
	}
	if !d.read[pkg] {
		d.read[pkg] = true
		d.load(pkg)
	}
	key := pkg + "." + t.Name()
	if field != "" {
		key += "." + field
	}
	return d.comments[key]
}

// load reads the comments of every struct type declared in package pkg's
// non-test files. A package that cannot be read just has no comments: the
// test that compares the files with the types catches a generator that
// silently lost them.
func (d *docs) load(pkg string) {
	dir := filepath.Join(d.root, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			continue
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.TYPE {
				continue
			}
			for _, spec := range gen.Specs {
				ts := spec.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				doc := ts.Doc
				if doc == nil && len(gen.Specs) == 1 {
					doc = gen.Doc
				}
				key := pkg + "." + ts.Name.Name
				d.comments[key] = paragraph(doc)
				for _, fld := range st.Fields.List {
					text := paragraph(fld.Doc)
					if text == "" {
						text = paragraph(fld.Comment)
					}
					for _, n := range fld.Names {
						d.comments[key+"."+n.Name] = text
					}
				}
			}
		}
	}
}

// paragraph joins a comment's lines into one.
func paragraph(c *ast.CommentGroup) string {
	if c == nil {
		return ""
	}
	return strings.Join(strings.Fields(c.Text()), " ")
}
