//go:build cgo && linux

package nvml

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// fakeNVML is the least of libnvidia-ml that go-nvml loads and Query calls:
// init and shutdown succeed, no device has the UUID asked for.
const fakeNVML = `
int nvmlInit_v2(void) { return 0; }
int nvmlInit(void) { return 0; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int r) { return "fake"; }
int nvmlDeviceGetHandleByUUID(const char *uuid, void **dev) { return 6; }
`

// Queries from several goroutines at once (a sampler beside a metrics
// scrape) against a real library load: go-nvml's load and close write its
// package-level state, so unserialised queries race (go test -race).
func TestQueryConcurrently(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skipf("no gcc to build a fake libnvidia-ml: %v", err)
	}
	dir := t.TempDir()
	src, lib := filepath.Join(dir, "fake.c"), filepath.Join(dir, "libnvidia-ml-fake.so")
	if err := os.WriteFile(src, []byte(fakeNVML), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Skipf("cannot build a fake libnvidia-ml: %v\n%s", err, out)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				f := QueryWith(gonvml.New(gonvml.WithLibraryPath(lib)), "GPU-fake")
				if f.Available || f.Reason == "" {
					t.Errorf("fake library: %+v", f)
					return
				}
			}
		})
	}
	wg.Wait()
}
