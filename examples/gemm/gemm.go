package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/fcsp-go/fcsp-go/examples/gemm/internal/cublas"
	"github.com/fcsp-go/fcsp-go/fcsp"
)

// bf16 values: the top half of the float32.
const (
	bf16One  = 0x3f80 // 1.0
	bf16Half = 0x3f00 // 0.5
)

func bf16(f float32) uint16 { return uint16(math.Float32bits(f) >> 16) }

// worker is one tenant's cuBLAS handle, made inside Do with the tenant's SM
// count and a workspace from its quota, and its three matrices.
type worker struct {
	t       *fcsp.Tenant
	h       cublas.Handle
	ws      *fcsp.Workspace
	a, b, c fcsp.DevicePtr
	m, n, k int
}

const workspaceBytes = 32 << 20

func newWorker(ctx context.Context, t *fcsp.Tenant, m, n, k int) (*worker, error) {
	w := &worker{t: t, m: m, n: n, k: k}
	var err error
	alloc := func(words int) fcsp.DevicePtr {
		if err != nil {
			return 0
		}
		var p fcsp.DevicePtr
		p, err = t.Alloc(ctx, uint64(2*words))
		return p
	}
	w.a, w.b, w.c = alloc(m*k), alloc(k*n), alloc(m*n)
	if err != nil {
		return nil, errors.Join(err, w.close(ctx))
	}
	// Inputs written in order on the tenant's own stream: a fill on the
	// legacy NULL stream would race the GEMM on this non-blocking stream.
	s := t.Stream()
	if err := errors.Join(s.MemsetD16(w.a, bf16One, uint64(m*k)), s.MemsetD16(w.b, bf16Half, uint64(k*n)), s.MemsetD16(w.c, 0, uint64(m*n))); err != nil {
		return nil, errors.Join(err, w.close(ctx))
	}
	err = t.Do(ctx, func(cur fcsp.Current) error {
		h, err := cublas.Create()
		if err != nil {
			return err
		}
		w.h = h
		st, err := cur.Stream(nil)
		if err != nil {
			return err
		}
		if w.ws, err = cur.Workspace(nil, workspaceBytes); err != nil {
			return err
		}
		return errors.Join(h.SetStream(st.Pointer()), h.SetSmCountTarget(cur.SMs()), h.SetWorkspace(w.ws.Pointer(), w.ws.Size()))
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("tenant %s: cuBLAS handle: %w", t.Name(), err), w.close(ctx))
	}
	return w, nil
}

// gemm queues one C = A B on the tenant's stream.
func (w *worker) gemm(ctx context.Context) error {
	return w.t.Do(ctx, func(fcsp.Current) error {
		return w.h.GemmBF16(w.m, w.n, w.k, uint64(w.a), uint64(w.b), uint64(w.c), 1, 0)
	})
}

// check reads the first column block of C back: every element is k * 1.0 *
// 0.5, exact in bf16 for the powers of two used here.
func (w *worker) check() error {
	if err := w.t.Stream().Synchronize(); err != nil {
		return err
	}
	words := min(w.m*w.n, 64*1024)
	out := make([]byte, 2*words)
	if err := w.t.CopyFromDevice(out, w.c); err != nil {
		return err
	}
	want := bf16(float32(w.k) * 0.5)
	for i := range words {
		if got := binary.LittleEndian.Uint16(out[2*i:]); got != want {
			return fmt.Errorf("tenant %s: C[%d] = bf16 %#04x, want %#04x (%g)", w.t.Name(), i, got, want, float32(w.k)*0.5)
		}
	}
	return nil
}

func (w *worker) close(ctx context.Context) error {
	var errs []error
	if w.h != (cublas.Handle{}) {
		errs = append(errs, w.t.Do(ctx, func(fcsp.Current) error { return w.h.Destroy() }))
	}
	if w.ws != nil {
		errs = append(errs, w.ws.Close())
	}
	for _, p := range []fcsp.DevicePtr{w.a, w.b, w.c} {
		if p != 0 {
			errs = append(errs, w.t.Free(p))
		}
	}
	return errors.Join(errs...)
}
