package greenctx_test

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// gpuSkips counts the GPU tests that skipped for want of a driver, so that
// TestMain can say so in one line: t.Skip's reason shows only with -v.
var gpuSkips struct {
	sync.Mutex
	n      int
	reason string
}

func skipGPU(t testing.TB, err error) {
	t.Helper()
	gpuSkips.Lock()
	gpuSkips.n++
	gpuSkips.reason = err.Error()
	gpuSkips.Unlock()
	t.Skipf("no NVIDIA driver on this machine (%v): GPU test skipped", err)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if gpuSkips.n > 0 {
		// go test ./... hides a passing package's output; this line shows
		// with -v, in `go test` run in the directory, and in .ci/run.
		fmt.Printf("internal/greenctx: %d GPU tests skipped: %s; run scripts/gpu-test.sh on a GPU machine\n", gpuSkips.n, gpuSkips.reason)
	}
	os.Exit(code)
}
