package smpart_test

import (
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/gpuskip"
)

// gpuSkips says in one line when the package's tests end how many GPU tests
// skipped for want of a driver.
var gpuSkips gpuskip.Counter

func skipGPU(t testing.TB, err error) {
	t.Helper()
	gpuSkips.Skip(t, err)
}

func TestMain(m *testing.M) { gpuSkips.Main(m, "internal/smpart") }
