//go:build cgo

// Command interop hands a tenant's handles to C the way a library binding
// does: a device buffer (DevicePtr.Pointer), a stream (StreamHandle) and the
// context (ContextHandle) inside Tenant.Do, each through its Pointer method,
// which go vet accepts (unsafe.Pointer(uintptr(p)) is "possible misuse of
// unsafe.Pointer"). The C function here only records what it was given; a
// real one would be cublasSetStream, cudnnSetStream or a TensorRT enqueue.
//
//	go run ./examples/interop            # on the GPU, else on the simulated H200
package main

/*
#include <stdint.h>

// library_call stands in for a C library's entry point: it takes a
// device buffer, a stream and a context as the opaque pointers such
// libraries take, and must not dereference the device buffer on the host.
static uintptr_t library_call(void *buf, void *stream, void *ctx, uintptr_t *seen) {
	seen[0] = (uintptr_t)buf;
	seen[1] = (uintptr_t)stream;
	seen[2] = (uintptr_t)ctx;
	return seen[0] ^ seen[1] ^ seen[2];
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	pool, err := fcsp.Open(ctx, 0)
	if errors.Is(err, fcsp.ErrNoDriver) {
		fmt.Fprintf(out, "no GPU here (%v): on the simulated H200, whose handles are the simulator's, not a driver's\n", err)
		pool, err = fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
	}
	if err != nil {
		return err
	}
	defer pool.Close()
	t, err := pool.NewTenant("interop", fcsp.WithSMs(16))
	if err != nil {
		return err
	}
	defer t.Close()
	buf, err := t.Alloc(ctx, 1<<20)
	if err != nil {
		return err
	}
	defer t.Free(buf)
	return t.Do(ctx, func(cur fcsp.Current) error {
		s, err := cur.Stream(nil)
		if err != nil {
			return err
		}
		var seen [3]C.uintptr_t
		C.library_call(buf.Pointer(), s.Pointer(), cur.Context().Pointer(), &seen[0])
		if uint64(seen[0]) != uint64(buf) || uintptr(seen[1]) != s.Uintptr() || uintptr(seen[2]) != cur.Context().Uintptr() {
			return fmt.Errorf("C saw %#x %#x %#x", seen[0], seen[1], seen[2])
		}
		fmt.Fprintf(out, "C got the buffer %v, the stream %v and the context %v (%s)\n", buf, s, cur.Context(), pool.Device())
		return nil
	})
}
