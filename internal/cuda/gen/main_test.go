package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The committed binding is what the table generates (CI checks the same with
// git diff; this catches it in go test).
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := generate("..")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("internal/cuda/%s is stale: run go generate ./internal/cuda", name)
		}
	}
}

func TestParseC(t *testing.T) {
	got := parseC("CUdeviceptr *p, void **params, const CUdevResource *in, unsigned long long v, int n")
	want := []cparam{{"CUdeviceptr *", "p"}, {"void **", "params"}, {"const CUdevResource *", "in"}, {"unsigned long long", "v"}, {"int", "n"}}
	if len(got) != len(want) {
		t.Fatalf("%v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("param %d: %+v want %+v", i, got[i], want[i])
		}
	}
	if s := paramList(got[:2]); s != "CUdeviceptr *p, void **params" {
		t.Errorf("paramList: %q", s)
	}
	if paramList(nil) != "void" {
		t.Error("no parameters is (void) in C")
	}
}

// A row the generator cannot map fails generation, naming the method, rather
// than writing a wrapper that drops or misplaces an argument.
func TestGeneratorRefusesWhatItCannotMap(t *testing.T) {
	handles := map[string]bool{"Context": true, "Stream": true}
	for _, c := range []struct {
		e    entry
		want string
	}{
		{entry{Sym: "cuX", Params: "int a", Method: "X(b int) error", Iface: driver}, "matches no Go parameter"},
		{entry{Sym: "cuX", Params: "int a, int b", Method: "X(a int) error", Iface: driver}, "matches no Go parameter"},
		{entry{Sym: "cuX", Params: "int a", Method: "X(a, b int) error", Iface: driver}, "reaches no C parameter"},
		{entry{Sym: "cuX", Params: "int *a, int *b", Method: "X() (int, error)", Iface: driver}, "more C outputs"},
		{entry{Sym: "cuX", Params: "int *a", Method: "X() (int, int, error)", Iface: driver}, "1 C outputs"},
		{entry{Sym: "cuX", Params: "int a", Method: "X(a int) int", Iface: driver}, "returns an error last"},
		{entry{Sym: "cuX", Params: "int *s", Method: "X(s int) error", Iface: driver}, "named like a Go parameter"},
		{entry{Sym: "cuX", Params: "const char *s", Method: "X(s string) error", Iface: driver}, "no generated conversion"},
		{entry{Sym: "cuX", Params: "struct foo f", Method: "X(f int) error", Iface: driver}, "no generated conversion"},
	} {
		saved := table
		table = []entry{c.e}
		_, err := genLibcuda(handles)
		table = saved
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: got %v, want an error saying %q", c.e.Method, c.e.Params, err, c.want)
		}
	}
}

func TestTableChecks(t *testing.T) {
	for _, c := range []struct {
		rows []entry
		want string
	}{
		{[]entry{{Sym: "cuX"}, {Sym: "cuX"}}, "twice"},
		{[]entry{{Sym: "cuX", Method: "X() error", Iface: "Other"}}, "Iface"},
		{[]entry{{Method: "X() error", Iface: driver}}, "CustomGo"},
		{[]entry{{Sym: "cuX", Names: []string{}, Method: "X() error", Iface: driver}}, "no symbol to resolve"},
		{[]entry{{Sym: "cuX", Names: []string{}, CustomC: "int a", Required: true}}, "required"},
	} {
		saved := table
		table = c.rows
		err := check()
		table = saved
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error saying %q", c.rows, err, c.want)
		}
	}
	if err := check(); err != nil {
		t.Errorf("the table itself: %v", err)
	}
}
