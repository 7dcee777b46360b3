package fcsp

import "github.com/fcsp-go/fcsp-go/internal/cuda"

// MemsetD16 sets n 16-bit words at p to v, in order on s (cuMemsetD16Async).
// Fill a library's inputs this way rather than with a plain cuMemsetD16:
// that one runs on the legacy NULL stream, which a tenant's non-blocking
// streams do not wait for, so a GEMM queued after it can read the old
// values (seen on the H200). The 2n bytes are checked as CopyToDevice's
// are: past the end of the SDK's block that p lies in, ErrOutOfRange.
func (h *Stream) MemsetD16(p DevicePtr, v uint16, n uint64) error {
	s, err := h.acquire()
	if err != nil {
		return err
	}
	defer s.release()
	if s.Closed() {
		return s.t.fail("Stream.MemsetD16", ErrClosed)
	}
	return s.t.fail("Stream.MemsetD16", s.t.memOps.MemsetD16((*memStream)(s), cuda.DevicePtr(p), v, n))
}

// MemsetD32 sets n 32-bit words at p to v, in order on s.
func (h *Stream) MemsetD32(p DevicePtr, v uint32, n uint64) error {
	s, err := h.acquire()
	if err != nil {
		return err
	}
	defer s.release()
	if s.Closed() {
		return s.t.fail("Stream.MemsetD32", ErrClosed)
	}
	return s.t.fail("Stream.MemsetD32", s.t.memOps.MemsetD32((*memStream)(s), cuda.DevicePtr(p), v, n))
}
