// Ground truth for the code-QA bench (bench/code_qa.py) on Go packages: Go's own parser.
//
// Usage: code_qa_truth ROOT. Prints one JSON object: every function, method and type declared in
// the .go files under ROOT (name, qualified name, kind, file, first and last line) and every call
// site (the called name, file, line, and the declaration it sits in). Standard library only.
package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

type definition struct {
	Name     string `json:"name"`
	Qualname string `json:"qualname"`
	Kind     string `json:"kind"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	EndLine  int    `json:"end_line"`
}

type call struct {
	Name   string  `json:"name"`
	File   string  `json:"file"`
	Line   int     `json:"line"`
	Caller *string `json:"caller"` // "file:line" of the enclosing function's definition
}

type truth struct {
	Parser      string       `json:"parser"`
	Definitions []definition `json:"definitions"`
	Calls       []call       `json:"calls"`
	Errors      []string     `json:"errors"`
}

// receiverType is the type a method is declared on: T for (t T), (t *T) and (t *T[K]).
func receiverType(expr ast.Expr) string {
	switch e := expr.(type) {
	case *ast.StarExpr:
		return receiverType(e.X)
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.IndexListExpr:
		return receiverType(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// calledName is the name a call names: f for f(), x.f() and f[T]().
func calledName(expr ast.Expr) *ast.Ident {
	switch e := expr.(type) {
	case *ast.Ident:
		return e
	case *ast.SelectorExpr:
		return e.Sel
	case *ast.IndexExpr:
		return calledName(e.X)
	case *ast.IndexListExpr:
		return calledName(e.X)
	case *ast.ParenExpr:
		return calledName(e.X)
	}
	return nil
}

func typeKind(spec *ast.TypeSpec) string {
	switch spec.Type.(type) {
	case *ast.StructType:
		return "struct"
	case *ast.InterfaceType:
		return "interface"
	}
	return "type"
}

func main() {
	root := os.Args[1]
	out := truth{Parser: "go/parser " + runtime.Version(), Definitions: []definition{}, Calls: []call{}, Errors: []string{}}
	var files []string
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") {
			files = append(files, path)
		}
		return nil
	})
	sort.Strings(files)
	fset := token.NewFileSet()
	for _, path := range files {
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			out.Errors = append(out.Errors, err.Error())
			if file == nil {
				continue
			}
		}
		line := func(p token.Pos) int { return fset.Position(p).Line }
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				qualname, kind := d.Name.Name, "function"
				if d.Recv != nil && len(d.Recv.List) > 0 {
					qualname, kind = receiverType(d.Recv.List[0].Type)+"."+d.Name.Name, "method"
				}
				out.Definitions = append(out.Definitions, definition{d.Name.Name, qualname, kind, rel, line(d.Pos()), line(d.End())})
				if d.Body == nil {
					continue
				}
				caller := rel + ":" + itoa(line(d.Pos()))
				ast.Inspect(d.Body, func(n ast.Node) bool {
					if c, ok := n.(*ast.CallExpr); ok {
						if name := calledName(c.Fun); name != nil {
							out.Calls = append(out.Calls, call{name.Name, rel, line(name.Pos()), &caller})
						}
					}
					return true
				})
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						start, end := s.Pos(), s.End()
						if len(d.Specs) == 1 { // `type T struct {...}`: the declaration, keyword included
							start, end = d.Pos(), d.End()
						}
						out.Definitions = append(out.Definitions, definition{s.Name.Name, s.Name.Name, typeKind(s), rel, line(start), line(end)})
					case *ast.ValueSpec: // calls in package-level initializers belong to no function
						for _, value := range s.Values {
							ast.Inspect(value, func(n ast.Node) bool {
								if c, ok := n.(*ast.CallExpr); ok {
									if name := calledName(c.Fun); name != nil {
										out.Calls = append(out.Calls, call{name.Name, rel, line(name.Pos()), nil})
									}
								}
								return true
							})
						}
					}
				}
			}
		}
	}
	json.NewEncoder(os.Stdout).Encode(out)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
