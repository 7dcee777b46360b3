package cuda

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorsCarryCodeAndName(t *testing.T) {
	err := check("cuMemAlloc_v2", ErrorOutOfMemory)
	if !errors.Is(err, ErrorOutOfMemory) {
		t.Fatal("errors.Is lost the result code")
	}
	var e *Error
	if !errors.As(err, &e) || e.Op != "cuMemAlloc_v2" || e.Code != 2 {
		t.Fatalf("errors.As: %#v", e)
	}
	if got, want := err.Error(), "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2)"; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	if check("x", Success) != nil {
		t.Fatal("success is not an error")
	}
	if !errors.Is(check("cuInit", errorLibraryMissing), ErrNoDriver) {
		t.Fatal("missing library must read as ErrNoDriver")
	}
	if Result(12345).Name() != "CUDA_ERROR_12345" {
		t.Fatal(Result(12345).Name())
	}
}

func TestArgsAlignAndPack(t *testing.T) {
	var a Args
	a.Int32(-1).Ptr(0x1122334455667788).Float32(1).Uint32(7)
	if a.Len() != 4 {
		t.Fatal(a.Len())
	}
	want := []uint32{0, 8, 16, 20}
	for i, o := range a.Offsets() {
		if o != want[i] {
			t.Fatalf("offsets %v want %v", a.Offsets(), want)
		}
	}
	if a.Bytes()[8] != 0x88 || len(a.Bytes()) != 24 {
		t.Fatalf("bad packing % x", a.Bytes())
	}
	a.Reset()
	if a.Len() != 0 || len(a.Bytes()) != 0 {
		t.Fatal("Reset left data")
	}
}

func TestResourceLayout(t *testing.T) {
	var r DevResource
	r.SetSM(SMInfo{Count: 132, MinPartition: 8, CoscheduledAlignment: 8})
	if r.Type() != ResourceSM || r.SMCount() != 132 {
		t.Fatal("SM member not at offset 96")
	}
	if got := r.SMInfo(12080); got.MinPartition != 0 {
		t.Fatal("API 12.x has no minSmPartitionSize")
	}
	if got := r.SMInfo(13000); got.MinPartition != 8 || got.CoscheduledAlignment != 8 {
		t.Fatalf("%+v", got)
	}
}

// AsError finds the *Error in a chain as errors.As does: wrapped, joined,
// or absent.
func TestAsError(t *testing.T) {
	e := &Error{Op: "cuStreamQuery", Code: ErrorNotReady}
	other := errors.New("other")
	for _, c := range []struct {
		err  error
		want *Error
	}{
		{nil, nil},
		{other, nil},
		{e, e},
		{fmt.Errorf("wrapped: %w", e), e},
		{errors.Join(other, fmt.Errorf("x: %w", e)), e},
		{errors.Join(other, other), nil},
	} {
		if got := AsError(c.err); got != c.want {
			t.Errorf("AsError(%v) = %v, want %v", c.err, got, c.want)
		}
		var as *Error
		if errors.As(c.err, &as); as != c.want {
			t.Errorf("errors.As(%v) = %v, AsError's disagrees", c.err, as)
		}
	}
}
