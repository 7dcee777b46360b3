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
	got := parseC("CUdeviceptr *p, void **params, const CUdevResource *in, unsigned long long v, int n=0")
	want := []cparam{{"CUdeviceptr *", "p", ""}, {"void **", "params", ""}, {"const CUdevResource *", "in", ""}, {"unsigned long long", "v", ""}, {"int", "n", "0"}}
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

// The entry points the other branches add by hand, as rows: they must
// generate as the agreed signatures say (a context parameter named ctx, flags
// fixed at 0, handle types of their own).
func TestAgreedRowsGenerate(t *testing.T) {
	rows := []entry{
		{Sym: "cuDevicePrimaryCtxReset", Names: []string{"cuDevicePrimaryCtxReset_v2"}, Params: "CUdevice d",
			Method: "PrimaryCtxReset(d Device) error", Iface: driver},
		{Sym: "cuCtxSetCurrent", Params: "CUcontext ctx", Method: "CtxSetCurrent(ctx Context) error", Iface: driver},
		{Sym: "cuCtxGetCurrent", Params: "CUcontext *c", Method: "CtxGetCurrent() (Context, error)", Iface: driver},
		{Sym: "cuStreamBeginCapture", Names: []string{"cuStreamBeginCapture_v2"}, Params: "CUstream s, int mode", Ctx: pushed,
			Method: "StreamBeginCapture(ctx Context, s Stream, mode int) error", Iface: driver},
		{Sym: "cuStreamEndCapture", Params: "CUstream s, CUgraph *g", Ctx: pushed,
			Method: "StreamEndCapture(ctx Context, s Stream) (Graph, error)", Iface: driver},
		{Sym: "cuGraphInstantiateWithFlags", Params: "CUgraphExec *e, CUgraph g, unsigned long long flags=0", Ctx: pushed,
			Method: "GraphInstantiate(ctx Context, g Graph) (GraphExec, error)", Iface: driver},
		{Sym: "cuGraphLaunch", Params: "CUgraphExec e, CUstream s", Ctx: pushed,
			Method: "GraphLaunch(ctx Context, e GraphExec, s Stream) error", Iface: driver},
		{Sym: "cuMemsetD16Async", Params: "CUdeviceptr p, unsigned short v, size_t n, CUstream s", Ctx: pushed,
			Method: "MemsetD16Async(ctx Context, p DevicePtr, v uint16, n uint64, s Stream) error", Iface: driver},
		{Sym: "cuEventQuery", Params: "CUevent e", Ctx: pushed, Method: "EventQuery(ctx Context, e Event) error", Iface: driver},
		{Sym: "cuStreamWaitEvent", Params: "CUstream s, CUevent e, unsigned flags=0", Ctx: pushed,
			Method: "StreamWaitEvent(ctx Context, s Stream, e Event) error", Iface: driver},
	}
	saved := table
	table = rows
	defer func() { table = saved }()
	if err := check(); err != nil {
		t.Fatal(err)
	}
	handles := map[string]bool{"Context": true, "Stream": true, "Event": true, "Graph": true, "GraphExec": true}
	goSrc, err := genLibcuda(handles)
	if err != nil {
		t.Fatal(err)
	}
	cSrc, h := string(genShimC()), string(genShimH())
	for _, want := range []string{
		`func (l *Library) GraphInstantiate(ctx Context, g Graph) (GraphExec, error) {`,
		`C.fcsp_cuGraphInstantiateWithFlags(C.CUcontext(handle(ctx)), &out0, C.CUgraph(handle(g)))`,
		`return GraphExec(unsafe.Pointer(out0)), err`,
		`C.fcsp_cuMemsetD16Async(C.CUcontext(handle(ctx)), C.CUdeviceptr(p), C.ushort(v), C.size_t(n), C.CUstream(handle(s)))`,
		`check("cuDevicePrimaryCtxReset_v2", Result(C.fcsp_cuDevicePrimaryCtxReset(C.CUdevice(d))))`,
		`C.fcsp_cuCtxSetCurrent(C.CUcontext(handle(ctx)))`,
	} {
		if !strings.Contains(string(goSrc), want) {
			t.Errorf("Go wrappers lack %s", want)
		}
	}
	for _, want := range []string{
		"SCOPED(c, fcsp_p_cuGraphInstantiateWithFlags(e, g, 0));",
		"SCOPED(c, fcsp_p_cuStreamWaitEvent(s, e, 0));",
		`fcsp_p_cuStreamBeginCapture = (pfn_cuStreamBeginCapture)dlsym(lib, "cuStreamBeginCapture_v2");`,
		"\treturn fcsp_p_cuCtxSetCurrent(ctx);",
	} {
		if !strings.Contains(cSrc, want) {
			t.Errorf("C wrappers lack %s", want)
		}
	}
	if want := "CUresult fcsp_cuStreamWaitEvent(CUcontext c, CUstream s, CUevent e);"; !strings.Contains(h, want) {
		t.Errorf("shim.h lacks %s", want)
	}
	if want := "typedef CUresult (*pfn_cuGraphInstantiateWithFlags)(CUgraphExec *e, CUgraph g, unsigned long long flags);"; !strings.Contains(string(genEntriesH()), want) {
		t.Errorf("shim_entries.h lacks %s", want)
	}
}
