//go:build cgo && linux

package nvml

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// emptyNVML is the least of libnvidia-ml Query calls: init (under its old
// name only) and shutdown succeed, no device has the UUID asked for.
const emptyNVML = `
int nvmlInit(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetHandleByUUID(const char *uuid, void **dev) { return 6; }
`

// fullNVML has one device, GPU-fake, with every fact Query reads except
// the power draw, and its clock reasons under the pre-535 name: the shim
// must fall back to that name, and report the missing entry point as that
// fact's refusal. The structs are nvml.h's. Its compute processes are 70
// (more than the shim's first buffer holds: it must ask again), the
// calling process the 70th, using 3 GiB.
const fullNVML = `
#include <string.h>
#include <unistd.h>
typedef struct { unsigned long long total, free, used; } mem;
typedef struct { unsigned gpu, memory; } util;
static int dev, inited; // NVML counts Init and Shutdown; queries run on many threads
int nvmlInit_v2(void) { __atomic_add_fetch(&inited, 1, __ATOMIC_SEQ_CST); return 0; }
int nvmlShutdown(void) {
	int v = __atomic_load_n(&inited, __ATOMIC_SEQ_CST);
	do { if (!v) return 1; } while (!__atomic_compare_exchange_n(&inited, &v, v - 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
	return 0;
}
int nvmlSystemGetDriverVersion(char *b, unsigned n) { strncpy(b, "580.159.04", n); return 0; }
int nvmlDeviceGetHandleByUUID(const char *uuid, void **d) {
	if (!__atomic_load_n(&inited, __ATOMIC_SEQ_CST)) return 1;
	if (strcmp(uuid, "GPU-fake")) return 6;
	*d = &dev; return 0;
}
int nvmlDeviceGetName(void *d, char *b, unsigned n) { if (n < 96) return 7; strcpy(b, "NVIDIA H200"); return 0; }
int nvmlDeviceGetMemoryInfo(void *d, mem *m) { m->total = 150ULL << 30; m->free = 110ULL << 30; m->used = 40ULL << 30; return 0; }
int nvmlDeviceGetUtilizationRates(void *d, util *u) { u->gpu = 97; u->memory = 31; return 0; }
int nvmlDeviceGetClockInfo(void *d, int t, unsigned *c) { if (t != 1) return 2; *c = 1755; return 0; }
int nvmlDeviceGetMaxClockInfo(void *d, int t, unsigned *c) { if (t != 1) return 2; *c = 1980; return 0; }
int nvmlDeviceGetEnforcedPowerLimit(void *d, unsigned *p) { *p = 700000; return 0; }
int nvmlDeviceGetCurrentClocksThrottleReasons(void *d, unsigned long long *r) { *r = 4 | 8 | (1ULL << 40); return 0; }
typedef struct { unsigned pid; unsigned long long used; unsigned gi, ci; } proc;
int nvmlDeviceGetComputeRunningProcesses_v3(void *d, unsigned *n, proc *p) {
	unsigned want = 70;
	if (*n < want) { *n = want; return 7; }
	for (unsigned i = 0; i < want; i++) {
		p[i].pid = i + 1 == want ? (unsigned)getpid() : 100000 + i;
		p[i].used = i + 1 == want ? 3ULL << 30 : 1ULL << 20;
		p[i].gi = p[i].ci = 0xFFFFFFFF;
	}
	*n = want;
	return 0;
}
`

// hiddenNVML lists the calling process without its memory (NVML's
// NVML_VALUE_NOT_AVAILABLE, as under some containers), through the _v2
// entry point, and no other.
const hiddenNVML = `
#include <unistd.h>
static int dev;
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetHandleByUUID(const char *uuid, void **d) { *d = &dev; return 0; }
typedef struct { unsigned pid; unsigned long long used; unsigned gi, ci; } proc;
int nvmlDeviceGetComputeRunningProcesses_v2(void *d, unsigned *n, proc *p) {
	if (*n < 1) { *n = 1; return 7; }
	p[0].pid = (unsigned)getpid(); p[0].used = ~0ULL; *n = 1;
	return 0;
}
`

// buildFake compiles src into a shared library and returns its path.
func buildFake(t *testing.T, src string) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skipf("no gcc to build a fake libnvidia-ml: %v", err)
	}
	dir := t.TempDir()
	c, lib := filepath.Join(dir, "fake.c"), filepath.Join(dir, "libnvidia-ml-fake.so")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, c).CombinedOutput(); err != nil {
		t.Skipf("cannot build a fake libnvidia-ml: %v\n%s", err, out)
	}
	return lib
}

// Through the shim and a real dlopen: the structs, the buffers, the
// fallback to an older entry point's name, and a missing one.
func TestLibraryReadsEveryFact(t *testing.T) {
	lib, err := Open(buildFake(t, fullNVML))
	if err != nil {
		t.Fatal(err)
	}
	f := QueryWith(lib, "GPU-fake")
	want := Facts{Available: true, Name: "NVIDIA H200", MemoryTotal: 150 << 30, MemoryUsed: 40 << 30,
		GPUUtil: 97, MemUtil: 31, Driver: "580.159.04", SMClockMHz: 1755, SMClockMaxMHz: 1980,
		PowerLimitMW: 700_000, ClockReasons: 4 | 8 | 1<<40, ProcessMemoryUsed: 3 << 30,
		Refused: []string{"power draw: ERROR_FUNCTION_NOT_FOUND"}}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("got  %+v\nwant %+v", f, want)
	}
	if f := QueryWith(lib, "GPU-other"); f.Available || f.Reason != "nvml has no device GPU-other: ERROR_NOT_FOUND" {
		t.Fatalf("unknown device: %+v", f)
	}
	// QueryWith shut down what it initialised: a device lookup now finds
	// NVML uninitialised.
	if _, r := lib.DeviceGetHandleByUUID("GPU-fake"); r != ERROR_UNINITIALIZED {
		t.Fatalf("after the queries: %v, want ERROR_UNINITIALIZED (an Init left without its Shutdown)", r)
	}
}

func TestOpenMissingLibrarySaysWhy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "libnvidia-ml.so.1")
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), "ERROR_LIBRARY_NOT_FOUND") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open(%s): %v, want ERROR_LIBRARY_NOT_FOUND naming the path", path, err)
	}
}

// Queries from several goroutines at once (a sampler beside a metrics
// scrape), each opening the library itself, the first ones concurrently:
// the shim's state is written once, under Open's lock (go test -race).
func TestQueryConcurrently(t *testing.T) {
	empty, full := buildFake(t, emptyNVML), buildFake(t, fullNVML)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				lib, err := Open(empty)
				if err != nil {
					t.Error(err)
					return
				}
				if f := QueryWith(lib, "GPU-fake"); f.Available || f.Reason == "" {
					t.Errorf("empty library: %+v", f)
					return
				}
				if lib, err = Open(full); err != nil {
					t.Error(err)
					return
				}
				if f := QueryWith(lib, "GPU-fake"); !f.Available || f.PowerLimitMW != 700_000 {
					t.Errorf("full library: %+v", f)
					return
				}
			}
		})
	}
	wg.Wait()
}

// Issue 54: the process's own device memory, through a session kept open
// for a sampler: found among more processes than the first buffer holds;
// a process NVML lists without its memory, or does not list, is an error
// that says so; the empty library's missing entry point is named.
func TestSessionProcessUsed(t *testing.T) {
	lib, err := Open(buildFake(t, fullNVML))
	require.NoError(t, err)
	s, err := OpenSession(lib, "GPU-fake")
	require.NoError(t, err)
	used, err := s.ProcessUsed(os.Getpid())
	require.NoError(t, err)
	require.Equal(t, uint64(3<<30), used)
	_, err = s.ProcessUsed(1)
	require.ErrorContains(t, err, "pid 1 is not among the 70 compute processes NVML lists on the device")
	s.Close()
	_, err = OpenSession(lib, "GPU-other")
	require.ErrorContains(t, err, "ERROR_NOT_FOUND")

	lib, err = Open(buildFake(t, hiddenNVML))
	require.NoError(t, err)
	s, err = OpenSession(lib, "GPU-fake")
	require.NoError(t, err)
	_, err = s.ProcessUsed(os.Getpid())
	require.ErrorContains(t, err, "NVML lists the process without its memory")
	s.Close()

	lib, err = Open(buildFake(t, emptyNVML))
	require.NoError(t, err)
	_, err = OpenSession(lib, "GPU-fake")
	require.ErrorContains(t, err, "ERROR_NOT_FOUND")
}
