package fcsp

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/dra"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/shm"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// goDoc is what go doc reads of this package: its non-test files.
func goDoc(t *testing.T) (*doc.Package, map[string]*ast.File) {
	t.Helper()
	fs := token.NewFileSet()
	pkgs, err := parser.ParseDir(fs, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	require.NoError(t, err)
	p := pkgs["fcsp"]
	require.NotNil(t, p)
	files := p.Files
	return doc.New(p, "github.com/fcsp-go/fcsp-go/fcsp", 0), files
}

// internalNames is, per file, the import names that are internal packages.
func internalNames(files map[string]*ast.File) map[string]bool {
	names := map[string]bool{}
	for _, f := range files {
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if !strings.Contains(path, "/internal/") {
				continue
			}
			name := path[strings.LastIndex(path, "/")+1:]
			if im.Name != nil {
				name = im.Name.Name
			}
			names[name] = true
		}
	}
	return names
}

// go doc shows a var's or const's value as written: no exported value of
// the package names an internal package (smpart.ErrGranularity,
// errs.ErrClosed, cuda.ErrNoDriver, ...), which a reader cannot follow.
func TestGoDocShowsNoInternalPackage(t *testing.T) {
	d, files := goDoc(t)
	internal := internalNames(files)
	var shown []string
	values := append(append([]*doc.Value{}, d.Vars...), d.Consts...)
	for _, ty := range d.Types {
		values = append(values, ty.Vars...)
		values = append(values, ty.Consts...)
	}
	for _, v := range values {
		for _, s := range v.Decl.Specs {
			vs := s.(*ast.ValueSpec)
			for _, val := range append(vs.Values, vs.Type) {
				if val == nil {
					continue
				}
				ast.Inspect(val, func(n ast.Node) bool {
					if se, ok := n.(*ast.SelectorExpr); ok {
						if id, ok := se.X.(*ast.Ident); ok && internal[id.Name] {
							shown = append(shown, vs.Names[0].Name+" = "+id.Name+"."+se.Sel.Name)
						}
					}
					return true
				})
			}
		}
	}
	require.Empty(t, shown, "go doc shows internal packages")
}

// Every exported name has a doc comment: types, functions, methods (String
// and Error too) and each value (its own comment, or its group's).
func TestGoDocEveryExportedNameIsDocumented(t *testing.T) {
	d, _ := goDoc(t)
	var bare []string
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			for _, s := range v.Decl.Specs {
				vs := s.(*ast.ValueSpec)
				if v.Doc == "" && vs.Doc == nil && vs.Comment == nil {
					bare = append(bare, vs.Names[0].Name)
				}
			}
		}
	}
	values(d.Vars)
	values(d.Consts)
	for _, f := range d.Funcs {
		if f.Doc == "" {
			bare = append(bare, f.Name)
		}
	}
	for _, ty := range d.Types {
		if ty.Doc == "" {
			bare = append(bare, ty.Name)
		}
		values(ty.Vars)
		values(ty.Consts)
		for _, f := range append(append([]*doc.Func{}, ty.Funcs...), ty.Methods...) {
			if f.Doc == "" {
				bare = append(bare, ty.Name+"."+f.Name)
			}
		}
	}
	require.Empty(t, bare, "exported names without a doc comment")
}

// docOf is the doc comment of the package-level function or the method
// (Type.Method) named.
func docOf(t *testing.T, name string) string {
	t.Helper()
	d, _ := goDoc(t)
	tn, fn, isMethod := strings.Cut(name, ".")
	for _, f := range d.Funcs {
		if !isMethod && f.Name == name {
			return f.Doc
		}
	}
	for _, ty := range d.Types {
		for _, f := range ty.Funcs {
			if !isMethod && f.Name == name {
				return f.Doc
			}
		}
		for _, m := range ty.Methods {
			if isMethod && ty.Name == tn && m.Name == fn {
				return m.Doc
			}
		}
	}
	t.Fatalf("no %s in the package", name)
	return ""
}

// WithMemoryQuota's doc says both bounds a user plans with: a quota above
// the device's limit is refused, and quotas together may pass the device,
// its limit being the bound of their sum.
func TestWithMemoryQuotaDocSaysTheBounds(t *testing.T) {
	d := strings.Join(strings.Fields(docOf(t, "WithMemoryQuota")), " ")
	for _, want := range []string{"ErrInvalidArgument", "WithDeviceMemoryLimit", "together", "ErrQuotaExceeded"} {
		require.Contains(t, d, want)
	}
	// What it says holds: 0.75 of the device each, twice, is accepted; more
	// than the device is not.
	p, _ := openSim(t)
	total := p.MemoryLimit()
	for _, n := range []string{"a", "b"} {
		_, err := p.NewTenant(n, WithMemoryQuota(total/4*3))
		require.NoError(t, err)
	}
	_, err := p.NewTenant("c", WithMemoryQuota(total+1))
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// Current.Workspace's doc says that the memory outlives the Do: it stays
// charged to the tenant until Workspace.Close or the tenant's Close.
func TestCurrentWorkspaceDocSaysItOutlivesTheDo(t *testing.T) {
	d := strings.Join(strings.Fields(docOf(t, "Current.Workspace")), " ")
	for _, want := range []string{"outlives", "Workspace.Close", "Close"} {
		require.Contains(t, d, want)
	}
}

// The sentinels errors.go's init sets are nil while the package's own vars
// are initialised (Go runs every var initialiser before any init), so no
// package-level var of this package, test files included, may read one:
// such an error would wrap nil and match nothing.
func TestNoPackageVarReadsAReexport(t *testing.T) {
	fs := token.NewFileSet()
	pkgs, err := parser.ParseDir(fs, ".", nil, 0)
	require.NoError(t, err)
	set := map[string]bool{}
	for name, f := range pkgs["fcsp"].Files {
		if name != "errors.go" {
			continue
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "init" {
				for _, st := range fd.Body.List {
					if as, ok := st.(*ast.AssignStmt); ok {
						for _, l := range as.Lhs {
							set[l.(*ast.Ident).Name] = true
						}
					}
				}
			}
		}
	}
	require.Contains(t, set, "ErrInvalidArgument", "errors.go's init sets the re-exports")
	var reads []string
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.VAR {
					continue
				}
				for _, s := range gd.Specs {
					for _, v := range s.(*ast.ValueSpec).Values {
						var look func(n ast.Node) bool
						look = func(n ast.Node) bool {
							switch n := n.(type) {
							case *ast.SelectorExpr: // errs.ErrClosed is another package's
								ast.Inspect(n.X, look)
								return false
							case *ast.Ident:
								if set[n.Name] {
									reads = append(reads, fs.Position(n.Pos()).String()+" "+n.Name)
								}
							}
							return true
						}
						ast.Inspect(v, look)
					}
				}
			}
		}
	}
	require.Empty(t, reads, "package-level vars that read a re-export before init sets it (use internal/errs' value)")
}

// The CUDA codes written as numbers (so that go doc shows no internal
// package) are the binding's, and the re-exports set in init are the
// internal packages' values.
func TestReexportsAreTheInternalValues(t *testing.T) {
	require.Equal(t, cuda.ErrorOutOfMemory, ErrDeviceOutOfMemory)
	require.Equal(t, cuda.ErrorInvalidValue, ErrInvalidValue)
	require.Equal(t, cuda.ErrorInvalidImage, ErrInvalidImage)
	require.Equal(t, cuda.ErrorNotFound, ErrNotFound)
	for _, e := range []struct{ got, want error }{
		{ErrNoDriver, cuda.ErrNoDriver}, {ErrNotAvailable, cuda.ErrNotAvailable},
		{ErrGranularity, smpart.ErrGranularity}, {ErrInsufficientSMs, smpart.ErrInsufficientSMs},
		{ErrBadRegion, shm.ErrBadRegion}, {ErrUnsafeRegion, shm.ErrUnsafeRegion}, {ErrDeviceNotVisible, dra.ErrNotVisible},
		{ErrClosed, errs.ErrClosed}, {ErrInvalidArgument, errs.ErrInvalidArgument}, {ErrInsideDo, errs.ErrInsideDo},
		{ErrFewWorkQueues, errs.ErrFewWorkQueues}, {ErrThrottled, errs.ErrThrottled}, {ErrDeviceLost, errs.ErrDeviceLost},
		{ErrNotComputed, errs.ErrNotComputed}, {ErrStaleGraph, errs.ErrStaleGraph}, {ErrNameTaken, errs.ErrNameTaken},
	} {
		require.NotNil(t, e.got)
		require.Equal(t, e.want, e.got)
	}
	// The package's own derived errors match their sentinels.
	for _, e := range []error{errNilFunc, errNotLimited, errNotReshapable, errNilContext, errZeroCurrent, errNoStream, errFirstStream} {
		require.ErrorIs(t, e, ErrInvalidArgument)
	}
}
