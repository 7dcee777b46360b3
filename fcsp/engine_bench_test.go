package fcsp

import (
	"context"
	"testing"
)

// BenchmarkEvent is the SDK's cost of a tenant's event calls on the
// simulator (the driver's own is the fake's): make and destroy one, record
// and wait for one, time two.
func BenchmarkEvent(b *testing.B) {
	p := benchPool(b)
	tn, err := p.NewTenant("t", WithSMs(16))
	if err != nil {
		b.Fatal(err)
	}
	defer tn.Close()
	s := tn.Stream()
	b.Run("call=NewClose", func(b *testing.B) {
		for b.Loop() {
			e, err := tn.NewEvent()
			if err != nil {
				b.Fatal(err)
			}
			if err := e.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	start, err := tn.NewEvent()
	if err != nil {
		b.Fatal(err)
	}
	end, err := tn.NewEvent()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("call=RecordSynchronize", func(b *testing.B) {
		for b.Loop() {
			if err := end.Record(s); err != nil {
				b.Fatal(err)
			}
			if err := end.Synchronize(); err != nil {
				b.Fatal(err)
			}
		}
	})
	if err := start.Record(s); err != nil {
		b.Fatal(err)
	}
	b.Run("call=Since", func(b *testing.B) {
		for b.Loop() {
			if _, err := end.Since(start); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMemset is the SDK's cost of a fill on a tenant's stream and of
// a small copy in and out, on the simulator: one word, so that the fake's
// filling (a loop over the bytes, whose speed moves with where its buffer
// lies) does not hide it.
func BenchmarkMemset(b *testing.B) {
	p := benchPool(b)
	tn, err := p.NewTenant("t", WithSMs(16))
	if err != nil {
		b.Fatal(err)
	}
	defer tn.Close()
	ptr, err := tn.Alloc(context.Background(), 4096)
	if err != nil {
		b.Fatal(err)
	}
	defer tn.Free(ptr)
	s := tn.Stream()
	b.Run("call=MemsetD32", func(b *testing.B) {
		for b.Loop() {
			if err := s.MemsetD32(ptr, 7, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	buf := make([]byte, 256)
	b.Run("call=CopyRoundTrip", func(b *testing.B) {
		for b.Loop() {
			if err := tn.CopyToDevice(ptr, buf); err != nil {
				b.Fatal(err)
			}
			if err := tn.CopyFromDevice(buf, ptr); err != nil {
				b.Fatal(err)
			}
		}
	})
}
