package fcsp

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Without a driver, the line the package prints at its end counts every GPU
// test that skipped: each skips through gpuSkips, none through a helper of
// its own.
func TestSkipLineCountsEveryGPUSkip(t *testing.T) {
	if _, err := cuda.Load(); err == nil {
		t.Skip("a driver is here: the GPU tests run")
	}
	if os.Getenv("FCSP_GPUSKIP_CHILD") != "" {
		t.Skip("the child run")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGPU", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "FCSP_GPUSKIP_CHILD=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	skipped := len(regexp.MustCompile(`(?m)^--- SKIP: TestGPU\S+ `).FindAll(out, -1))
	require.Positive(t, skipped, "%s", out)
	m := regexp.MustCompile(`fcsp: (\d+) GPU tests skipped: `).FindSubmatch(out)
	require.NotNil(t, m, "no skip line:\n%s", out)
	n, _ := strconv.Atoi(string(m[1]))
	require.Equal(t, skipped, n, "the skip line's count against the tests that skipped")
}
