package admission

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// A graph's launch-rate price is its captured kernels', each priced as a
// launch of it; an unlimited gate prices nothing.
func TestGraphRateIsItsKernels(t *testing.T) {
	one, warp := cuda.Dim3{X: 1, Y: 1, Z: 1}, cuda.Dim3{X: 32, Y: 1, Z: 1}
	_, g := gate(t, new(events), Config{SMLimit: 0.5, SMs: 8, ThreadsPerSM: 2048, Refill: time.Millisecond})
	k := []Shape{{one, warp}, {warp, warp}}
	if got, want := g.Rate(k), g.Rate(k[:1])+g.Rate(k[1:]); got != want || got <= 0 || g.Rate(k[:1]) <= 0 {
		t.Fatalf("Rate = %v, want %v (> 0)", got, want)
	}
	if got := g.Rate(nil); got != 0 {
		t.Fatalf("Rate of no kernels = %v", got)
	}
	_, free := gate(t, new(events), Config{})
	if got := free.Rate(k); got != 0 {
		t.Fatalf("unlimited gate: Rate = %v", got)
	}
	// An untimed graph launch is charged its rate: the bucket may let one
	// dear graph through on credit (nothing refills: the clock is frozen),
	// and the next waits (here until ctx ends).
	var est Estimate
	if _, err := g.AdmitGraph(context.Background(), Graph{Est: &est, Kernels: k[:1]}, false); err != nil {
		t.Fatalf("a cheap graph: %v", err)
	}
	dear := make([]Shape, 1000)
	for i := range dear {
		dear[i] = Shape{cuda.Dim3{X: 1024, Y: 1, Z: 1}, cuda.Dim3{X: 1024, Y: 1, Z: 1}}
	}
	var err error
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		_, err = g.AdmitGraph(ctx, Graph{Est: &est, Kernels: dear}, false)
		cancel()
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second graph dearer than the bucket: %v, want context.DeadlineExceeded", err)
	}
}

func TestCheckShape(t *testing.T) {
	one := cuda.Dim3{X: 1, Y: 1, Z: 1}
	if err := CheckShape("k", one, one); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][2]cuda.Dim3{{{X: 0, Y: 1, Z: 1}, one}, {one, {X: 1, Y: 1, Z: 0}}} {
		err := CheckShape("k", bad[0], bad[1])
		if !errors.Is(err, errs.ErrInvalidArgument) || !strings.Contains(err.Error(), "at least 1") {
			t.Fatalf("grid %v, block %v: %v", bad[0], bad[1], err)
		}
	}
}
