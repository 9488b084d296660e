package worklease_test

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// A layer is a set of the root package's files, by name or pattern (see
// filepath.Match); the last layer has every file the others do not.
type layer struct {
	name  string
	files []string
}

// packageLayers are the root package's layers, lowest first: the words
// that the state machine and the Manager both speak (statuses, results,
// event kinds, errors, tokens), then the state machine of one domain, then
// the shell around it (the Manager: shards, locks, the clock, the journal,
// the observer). A file uses nothing that a layer above its own declares,
// and a method is declared in the layer of its receiver's type.
var packageLayers = []layer{
	{"vocabulary", []string{"token.go", "errors.go", "instant.go", "limits.go", "causes.go", "results.go", "events.go"}},
	{"state machine", []string{"state*.go", "backlog.go"}},
	{"shell", nil},
}

// TestLayers checks that the state machine's files and backlog.go use
// nothing of the shell, and the vocabulary nothing of either. Run it alone
// with go test -run TestLayers .
func TestLayers(t *testing.T) {
	t.Parallel()
	problems, err := layerProblems(".", packageLayers)
	require.NoError(t, err)
	require.Empty(t, problems, "files that use names of a layer above their own")
}

// TestLayersFailsOnAClimb checks that the check fails when a state file
// uses a name of the shell, or a method of a state type sits in the shell.
func TestLayersFailsOnAClimb(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":      "module example.com/climb\n",
		"results.go":  "package climb\n\ntype Status uint8\n",
		"state.go":    "package climb\n\ntype state struct{ n int }\n\nfunc (s *state) step() Status { return Status(s.n) + Status(limit()) }\n",
		"manager.go":  "package climb\n\ntype Manager struct{ s state }\n\nfunc limit() int { return 3 }\n",
		"describe.go": "package climb\n\nfunc (s *state) describe() string { return \"\" }\n",
	}
	for name, text := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
	}
	problems, err := layerProblems(dir, []layer{
		{"vocabulary", []string{"results.go"}},
		{"state machine", []string{"state*.go"}},
		{"shell", nil},
	})
	require.NoError(t, err)
	require.Equal(t, []string{
		"describe.go: method describe of state (state machine) is declared in the shell",
		"state.go: uses limit, declared in manager.go (shell)",
	}, problems)
}

// layerProblems type-checks the package in dir, leaving out its tests,
// and returns, sorted, each use of a name declared in a layer above the
// user's, and each method declared outside its receiver's layer.
func layerProblems(dir string, layers []layer) ([]string, error) {
	pkg, err := build.ImportDir(dir, 0)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", nil)}
	tpkg, err := conf.Check(pkg.ImportPath, fset, files, info)
	if err != nil {
		return nil, err
	}
	layerOf := func(pos token.Pos) (int, string) {
		file := filepath.Base(fset.Position(pos).Filename)
		for i, l := range layers[:len(layers)-1] {
			for _, pattern := range l.files {
				if ok, _ := filepath.Match(pattern, file); ok {
					return i, file
				}
			}
		}
		return len(layers) - 1, file
	}
	seen := make(map[string]bool)
	for id, obj := range info.Uses {
		if obj.Pkg() != tpkg || !obj.Pos().IsValid() {
			continue // another package's, or a universe name
		}
		user, userFile := layerOf(id.Pos())
		decl, declFile := layerOf(obj.Pos())
		if decl > user {
			seen[fmt.Sprintf("%s: uses %s, declared in %s (%s)", userFile, obj.Name(), declFile, layers[decl].name)] = true
		}
	}
	for id, obj := range info.Defs {
		fn, ok := obj.(*types.Func)
		if !ok || fn.Signature().Recv() == nil {
			continue
		}
		recv := fn.Signature().Recv().Type()
		if p, ok := recv.(*types.Pointer); ok {
			recv = p.Elem()
		}
		named, ok := recv.(*types.Named)
		if !ok {
			continue
		}
		method, methodFile := layerOf(id.Pos())
		typ, _ := layerOf(named.Obj().Pos())
		if method != typ {
			seen[fmt.Sprintf("%s: method %s of %s (%s) is declared in the %s",
				methodFile, fn.Name(), named.Obj().Name(), layers[typ].name, layers[method].name)] = true
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}
