//go:build cgo && linux

package fcsp

import (
	"context"
	"os"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
)

// BenchmarkDoCgo is BenchmarkDo's unmetered cases with the thread's
// current context kept by a stand-in libcuda (internal/cuda's
// testdata/mockcuda.c) through the real cgo binding, so that Do's cgo
// crossings cost here what they cost on the H200, less the driver's own
// work; everything else is the simulated device. raw is one crossing
// (cuCtxGetCurrent), which f also makes, in the same run; Do's overhead is
// do minus raw. scripts/do-mock-bench.sh builds the library and runs it;
// without FCSP_DO_MOCK_LIB it skips.
func BenchmarkDoCgo(b *testing.B) {
	lib := os.Getenv("FCSP_DO_MOCK_LIB")
	if lib == "" {
		b.Skip("FCSP_DO_MOCK_LIB is not set: run scripts/do-mock-bench.sh")
	}
	// Load reads FCSP_LIBCUDA once per process: the script sets both, so
	// that nothing in this process can have loaded a real driver, whose
	// current context this benchmark would set to the simulator's handles.
	if os.Getenv("FCSP_LIBCUDA") != lib {
		b.Fatal("FCSP_LIBCUDA must name the same mock library as FCSP_DO_MOCK_LIB")
	}
	l, err := cuda.Load()
	if err != nil {
		b.Fatal(err)
	}
	p, err := Open(context.Background(), 0, withDriver(func() cuda.Driver {
		f := fake.New(fake.H200())
		fake.RegisterKernels(f)
		return cgoCurrent{f, l}
	}, true))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	for _, tc := range []struct {
		name string
		opts []TenantOption
	}{
		{"partitioned", []TenantOption{WithSMs(16)}},
		{"unpartitioned", nil},
	} {
		t, err := p.NewTenant("do-cgo-"+tc.name, tc.opts...)
		if err != nil {
			b.Fatal(err)
		}
		raw := func() error { _, err := l.CtxGetCurrent(); return err }
		benchRawThenDo(b, tc.name, t, raw, func(Current) error { return raw() })
		if err := t.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// cgoCurrent is the simulated device with the calls that make up Do's
// context switch sent through the real binding instead.
type cgoCurrent struct {
	*fake.Driver
	lib *cuda.Library
}

func (d cgoCurrent) CtxGetCurrent() (cuda.Context, error) { return d.lib.CtxGetCurrent() }
func (d cgoCurrent) CtxSetCurrent(c cuda.Context) error   { return d.lib.CtxSetCurrent(c) }
