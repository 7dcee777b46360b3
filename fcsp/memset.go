package fcsp

import (
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// MemsetD16 sets n 16-bit words at p to v, in order on s (cuMemsetD16Async).
// Fill a library's inputs this way rather than with a plain cuMemsetD16:
// that one runs on the legacy NULL stream, which a tenant's non-blocking
// streams do not wait for, so a GEMM queued after it can read the old
// values (seen on the H200).
func (s *Stream) MemsetD16(p DevicePtr, v uint16, n uint64) error {
	return s.memset(p, n, func(ctx cuda.Context) error { return s.t.pool.drv.MemsetD16Async(ctx, cuda.DevicePtr(p), v, n, s.h()) })
}

// MemsetD32 sets n 32-bit words at p to v, in order on s.
func (s *Stream) MemsetD32(p DevicePtr, v uint32, n uint64) error {
	return s.memset(p, n, func(ctx cuda.Context) error { return s.t.pool.drv.MemsetD32Async(ctx, cuda.DevicePtr(p), v, n, s.h()) })
}

func (s *Stream) memset(p DevicePtr, n uint64, f func(cuda.Context) error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if n == 0 {
		return fmt.Errorf("%w: memset of 0 words", ErrInvalidArgument)
	}
	if err := s.t.do(f); err != nil {
		return fmt.Errorf("tenant %q: %w", s.t.name, err)
	}
	return nil
}
