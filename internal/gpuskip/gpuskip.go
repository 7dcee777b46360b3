// Package gpuskip is test support for the packages with GPU tests: it counts
// the tests that skip for want of a driver and says so in one line when the
// package's tests end, since t.Skip's reason shows only with -v and go test
// ./... hides a passing package's output (the line shows with -v, with go
// test run in the package's directory, and in .ci/run). Production code
// never imports it.
package gpuskip

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// Counter counts one package's skipped GPU tests.
type Counter struct {
	mu     sync.Mutex
	n      int
	reason string
}

// Skip skips t, a GPU test that found no driver (err says why).
func (c *Counter) Skip(t testing.TB, err error) {
	t.Helper()
	c.mu.Lock()
	c.n++
	c.reason = err.Error()
	c.mu.Unlock()
	t.Skipf("no NVIDIA driver on this machine (%v): GPU test skipped", err)
}

// Main runs the package's tests, prints how many GPU tests skipped and why,
// and exits with the tests' code; call it from TestMain.
func (c *Counter) Main(m *testing.M, pkg string) {
	code := m.Run()
	c.mu.Lock()
	if c.n > 0 {
		fmt.Printf("%s: %d GPU tests skipped: %s; run scripts/gpu-test.sh on a GPU machine\n", pkg, c.n, c.reason)
	}
	c.mu.Unlock()
	os.Exit(code)
}
