//go:build cgo && linux

package cuda

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestBindingAgainstMockDriver loads a stand-in libcuda (testdata/mockcuda.c,
// built here with the C compiler) in a child process, since Load happens once
// per process, and checks what reaches the driver through the binding: which
// symbol each entry point resolved to, the push/call/pop around
// context-dependent calls, the zero-context forms, the null-array split, the
// 144-byte resources, error wrapping with the entry point's name, and Load's
// refusal of a driver that lacks required entry points.
func TestBindingAgainstMockDriver(t *testing.T) {
	if os.Getenv("FCSP_MOCK_CHILD") != "" {
		t.Skip("the child runs TestMockDriverChild only")
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler (%s) to build the mock driver: %v", cc, err)
	}
	dir := t.TempDir()
	for _, v := range []struct {
		name  string
		flags []string
	}{{"full", nil}, {"missing", []string{"-DMISSING_REQUIRED"}}} {
		lib := filepath.Join(dir, "libmockcuda-"+v.name+".so")
		args := append([]string{"-shared", "-fPIC", "-o", lib, "testdata/mockcuda.c"}, v.flags...)
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", cc, args, err, out)
		}
		cmd := exec.Command(os.Args[0], "-test.run", "^TestMockDriverChild$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "FCSP_MOCK_CHILD="+v.name, "FCSP_LIBCUDA="+lib,
			"MOCK_LOG="+filepath.Join(dir, v.name+".log"))
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestMockDriverChild") {
			t.Errorf("mock driver %q: %v\n%s", v.name, err, out)
		}
	}
}

func TestMockDriverChild(t *testing.T) {
	switch os.Getenv("FCSP_MOCK_CHILD") {
	case "":
		t.Skip("run by TestBindingAgainstMockDriver in a child process")
	case "missing":
		_, err := Load()
		if !errors.Is(err, ErrNotAvailable) || !strings.HasSuffix(err.Error(), "lacks cuMemFree_v2 cuLaunchKernel cuStreamCreate ") {
			t.Fatalf("Load of a driver without cuMemFree_v2, cuLaunchKernel and cuStreamCreate: %v", err)
		}
		return
	}
	logPath := os.Getenv("MOCK_LOG")
	l, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	// calls runs f and returns the lines the mock logged meanwhile.
	calls := func(f func()) []string {
		t.Helper()
		if err := os.WriteFile(logPath, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		f()
		b, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	expect := func(what string, got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: the driver saw\n\t%s\nwant\n\t%s", what, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
	}
	ok := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	const ctx = Context(0x1000)

	if got := l.Name(); got != "libcuda.so.1 (driver API 13000)" {
		t.Errorf("Name: %q", got)
	}
	var dev Device
	expect("DeviceGet", calls(func() { dev, err = l.DeviceGet(1); ok(err) }), "cuDeviceGet 1")
	if dev != 101 {
		t.Errorf("DeviceGet: %d", dev)
	}
	if n, err := l.DeviceCount(); n != 2 || err != nil {
		t.Errorf("DeviceCount: %d %v", n, err)
	}
	if s, err := l.DeviceName(dev); s != "Mock H200 #101" || err != nil {
		t.Errorf("DeviceName: %q %v", s, err)
	}
	var uuid [16]byte
	expect("DeviceUUID falls back to the unversioned name", calls(func() { uuid, err = l.DeviceUUID(dev); ok(err) }), "cuDeviceGetUuid 101")
	if uuid[15] != 15 {
		t.Errorf("DeviceUUID: %v", uuid)
	}
	var v int
	expect("DeviceAttribute", calls(func() { v, err = l.DeviceAttribute(dev, 16); ok(err) }), "cuDeviceGetAttribute a=16 d=101")
	if v != 261 {
		t.Errorf("DeviceAttribute: %d", v)
	}
	var total uint64
	expect("DeviceTotalMem takes _v2", calls(func() { total, err = l.DeviceTotalMem(dev); ok(err) }), "cuDeviceTotalMem_v2 101")
	if total != 141<<30 {
		t.Errorf("DeviceTotalMem: %d", total)
	}
	if c, err := l.PrimaryCtxRetain(dev); c != ctx || err != nil {
		t.Errorf("PrimaryCtxRetain: %#x %v", c, err)
	}
	expect("PrimaryCtxRelease", calls(func() { ok(l.PrimaryCtxRelease(dev)) }), "cuDevicePrimaryCtxRelease_v2 101")
	expect("PrimaryCtxReset", calls(func() { ok(l.PrimaryCtxReset(dev)) }), "cuDevicePrimaryCtxReset_v2 101") // entry points added for fault

	// An output comes back without a heap allocation (the shims are
	// declared noescape: each output variable escaped before, one 8-byte
	// allocation per call, on the H200 too). The mock logs to a file in C,
	// which Go does not count.
	if n := testing.AllocsPerRun(50, func() { _, _ = l.PrimaryCtxRetain(dev) }); n != 0 {
		t.Errorf("PrimaryCtxRetain: %v allocations per call, want 0", n)
	}
	if n := testing.AllocsPerRun(50, func() { _, _ = l.MemAlloc(ctx, 4096) }); n != 0 {
		t.Errorf("MemAlloc: %v allocations per call, want 0", n)
	}

	// Context-dependent calls push, call, pop.
	var p DevicePtr
	expect("MemAlloc takes _v2, pushed", calls(func() { p, err = l.MemAlloc(ctx, 4096); ok(err) }),
		"push 0x1000", "cuMemAlloc_v2 4096 in 0x1000", "pop")
	if p != 0xabc000 {
		t.Errorf("MemAlloc: %#x", p)
	}
	expect("a failed call still pops", calls(func() {
		err := l.MemFree(ctx, 0xbad)
		var e *Error
		if !errors.As(err, &e) || e.Op != "cuMemFree_v2" || e.Code != ErrorInvalidValue {
			t.Errorf("MemFree of a bad pointer: %v", err)
		}
	}), "push 0x1000", "cuMemFree_v2 0xbad in 0x1000", "pop")
	expect("a refused push calls nothing", calls(func() {
		_, err := l.MemAlloc(0xdead, 1)
		if !errors.Is(err, ErrorInvalidContext) || !strings.HasPrefix(err.Error(), "cuMemAlloc_v2: ") {
			t.Errorf("MemAlloc in a refused context: %v", err)
		}
	}), "push 0xdead refused")
	if f, tot, err := l.MemGetInfo(ctx); f != 10 || tot != 20 || err != nil {
		t.Errorf("MemGetInfo: %d %d %v", f, tot, err)
	}
	expect("MemcpyHtoD", calls(func() { ok(l.MemcpyHtoD(ctx, 0xabc000, []byte("hi"))) }),
		"push 0x1000", "cuMemcpyHtoD_v2 0xabc000 hi in 0x1000", "pop")
	buf := make([]byte, 3)
	expect("MemcpyDtoH", calls(func() { ok(l.MemcpyDtoH(ctx, buf, 0xabc000)) }),
		"push 0x1000", "cuMemcpyDtoH_v2 0xabc000 3 in 0x1000", "pop")
	if string(buf) != "xxx" {
		t.Errorf("MemcpyDtoH: %q", buf)
	}
	var s Stream
	expect("StreamCreate", calls(func() { s, err = l.StreamCreate(ctx, 1); ok(err) }),
		"push 0x1000", "cuStreamCreate flags=1 in 0x1000", "pop")
	if s != 0x3000 {
		t.Errorf("StreamCreate: %#x", s)
	}

	// The zero-context forms push nothing; with a context they push it.
	expect("StreamSynchronize, no context", calls(func() { ok(l.StreamSynchronize(0, s)) }), "cuStreamSynchronize 0x3000 in (nil)")
	expect("StreamSynchronize, a context", calls(func() { ok(l.StreamSynchronize(ctx, s)) }),
		"push 0x1000", "cuStreamSynchronize 0x3000 in 0x1000", "pop")
	expect("EventSynchronize, no context", calls(func() { ok(l.EventSynchronize(0, 0x4000)) }), "cuEventSynchronize 0x4000 in (nil)")
	expect("MemAllocFromPoolAsync, no context", calls(func() { _, err = l.MemAllocFromPoolAsync(0, 64, 0x9000, s); ok(err) }),
		"cuMemAllocFromPoolAsync 64 0x9000 0x3000 in (nil)")
	expect("MemFreeAsync, no context", calls(func() { ok(l.MemFreeAsync(0, 0xdef000, s)) }), "cuMemFreeAsync 0xdef000 0x3000 in (nil)")
	expect("MemFreeAsync, a context", calls(func() { ok(l.MemFreeAsync(ctx, 0xdef000, s)) }),
		"push 0x1000", "cuMemFreeAsync 0xdef000 0x3000 in 0x1000", "pop")
	var args Args
	args.Int32(7).Ptr(0xabc000)
	expect("LaunchKernel, no context", calls(func() { ok(l.LaunchKernel(0, 0x6000, Dim3{2, 3, 4}, Dim3{32, 1, 1}, 128, s, &args)) }),
		"cuLaunchKernel 0x6000 grid=2,3,4 block=32,1,1 shmem=128 s=0x3000 args=7,0xabc000 extra=(nil) in (nil)")
	expect("LaunchKernel, a context, no arguments", calls(func() { ok(l.LaunchKernel(ctx, 0x6000, Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, s, nil)) }),
		"push 0x1000", "cuLaunchKernel 0x6000 grid=1,1,1 block=1,1,1 shmem=0 s=0x3000 params=NULL in 0x1000", "pop")

	expect("EventRecord", calls(func() { ok(l.EventRecord(ctx, 0x4000, s)) }), "push 0x1000", "cuEventRecord 0x4000 0x3000 in 0x1000", "pop")
	var ms float32
	expect("EventElapsedMs takes _v2", calls(func() { ms, err = l.EventElapsedMs(ctx, 0x4000, 0x4001); ok(err) }),
		"push 0x1000", "cuEventElapsedTime_v2 0x4000 0x4001", "pop")
	if ms != 1.5 {
		t.Errorf("EventElapsedMs: %v", ms)
	}
	expect("ModuleLoadData NUL-terminates", calls(func() { _, err = l.ModuleLoadData(ctx, []byte(".version 8.0")); ok(err) }),
		"push 0x1000", "cuModuleLoadData .version 8.0 in 0x1000", "pop")
	expect("ModuleGetFunction", calls(func() { _, err = l.ModuleGetFunction(ctx, 0x5000, "chain"); ok(err) }),
		"push 0x1000", "cuModuleGetFunction 0x5000 chain in 0x1000", "pop")
	expect("CtxSynchronize", calls(func() { ok(l.CtxSynchronize(ctx)) }), "push 0x1000", "cuCtxSynchronize in 0x1000", "pop")
	expect("CtxCreate takes _v4 and pops what it pushed", calls(func() { _, err = l.CtxCreate(dev); ok(err) }),
		"cuCtxCreate_v4 params=(nil) flags=0 d=101", "pop")
	expect("CtxDestroy is not scoped", calls(func() { ok(l.CtxDestroy(0x2000)) }), "cuCtxDestroy_v2 0x2000")

	// Pools: the props struct, the 64-bit attributes.
	expect("MemPoolCreate", calls(func() { _, err = l.MemPoolCreate(ctx, 3, 1<<30); ok(err) }),
		"push 0x1000", "cuMemPoolCreate alloc=1 handles=0 loc=1,3 maxSize=1073741824 in 0x1000", "pop")
	expect("MemPoolSetAttribute", calls(func() { ok(l.MemPoolSetAttribute(ctx, 0x9000, PoolReleaseThreshold, 1<<40)) }),
		"push 0x1000", "cuMemPoolSetAttribute 0x9000 a=4 v=1099511627776 in 0x1000", "pop")
	if v, err := l.MemPoolGetAttribute(ctx, 0x9000, PoolReleaseThreshold); v != 77 || err != nil {
		t.Errorf("MemPoolGetAttribute: %d %v", v, err)
	}

	// Resources: 144 bytes each way; the split's counting mode passes a
	// null array.
	res, err := l.DeviceGetDevResource(dev, ResourceSM)
	ok(err)
	if res.Raw[0] != byte(ResourceSM) || res.Raw[96] != 132 || res.Raw[143] != 0x7e {
		t.Errorf("DeviceGetDevResource: % x", res.Raw)
	}
	var n int
	expect("split, counting", calls(func() { _, _, n, err = l.DevSmResourceSplitByCount(res, 0, 16, 0); ok(err) }),
		"cuDevSmResourceSplitByCount res=NULL n=0 in.sm=132 in.last=0x7e rem=NULL flags=0 min=16")
	if n != 8 {
		t.Errorf("split count: %d", n)
	}
	groups, rem, n, err := l.DevSmResourceSplitByCount(res, 0, 16, 3)
	ok(err)
	if n != 3 || len(groups) != 3 || groups[2].Raw[143] != 2 || groups[2].Raw[96] != 16 || rem.Raw[96] != 132-48 {
		t.Errorf("split: n=%d groups=%d rem.sm=%d", n, len(groups), rem.Raw[96])
	}
	expect("GenerateDesc", calls(func() { _, err = l.DevResourceGenerateDesc(groups); ok(err) }), "cuDevResourceGenerateDesc n=3 last=0,0x2")
	var g GreenCtx
	expect("GreenCtxCreate", calls(func() { g, err = l.GreenCtxCreate(0x7000, dev, GreenCtxDefaultStream); ok(err) }),
		"cuGreenCtxCreate 0x7000 101 1")

	// An optional entry point this driver lacks.
	err = l.GreenCtxDestroy(g)
	var e *Error
	if !errors.Is(err, ErrNotAvailable) || !errors.As(err, &e) || e.Op != "cuGreenCtxDestroy" {
		t.Errorf("GreenCtxDestroy on a driver without it: %v", err)
	}

	// entry points added for dofast: CtxSwapCurrent is get, then set where
	// they differ, in one cgo call, on the calling thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ok(l.CtxSetCurrent(0))
	var prev Context
	var thread int
	expect("CtxSwapCurrent sets what differs", calls(func() { prev, thread, err = l.CtxSwapCurrent(ctx); ok(err) }),
		"cuCtxGetCurrent", "cuCtxSetCurrent 0x1000")
	if prev != 0 || thread != syscall.Gettid() {
		t.Errorf("CtxSwapCurrent: previous %#x on thread %d, want 0 on %d", prev, thread, syscall.Gettid())
	}
	expect("CtxSwapCurrent to the current one only looks", calls(func() { prev, thread, err = l.CtxSwapCurrent(ctx); ok(err) }),
		"cuCtxGetCurrent")
	if prev != ctx || thread != syscall.Gettid() {
		t.Errorf("CtxSwapCurrent: previous %#x on thread %d, want %#x on %d", prev, thread, ctx, syscall.Gettid())
	}
	if c, err := l.CtxGetCurrent(); c != ctx || err != nil {
		t.Errorf("after CtxSwapCurrent: current %#x %v", c, err)
	}
	expect("CtxSwapCurrent's failed set", calls(func() {
		_, _, err := l.CtxSwapCurrent(0xdead)
		if !errors.Is(err, ErrorInvalidContext) || !strings.HasPrefix(err.Error(), "cuCtxSetCurrent: ") {
			t.Errorf("CtxSwapCurrent to a refused context: %v", err)
		}
	}), "cuCtxGetCurrent", "cuCtxSetCurrent 0xdead refused")
	if n := testing.AllocsPerRun(50, func() { _, _, _ = l.CtxSwapCurrent(ctx) }); n != 0 {
		t.Errorf("CtxSwapCurrent: %v allocations per call, want 0", n)
	}
}
