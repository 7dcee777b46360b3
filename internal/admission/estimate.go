package admission

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Estimates: what a kind of work is expected to cost, learnt from what it
// measured. A metered tenant times its work on the GPU clock (meter.go);
// each completed launch, graph or Do teaches its estimate, which prices
// the next one under a GPU share (price.go) and gives the slowdown
// (bandwidth.go).

// ewmaWeight is the weight of a new measurement in an estimate.
const ewmaWeight = 0.25

// Estimate is a running average of one kind of work's GPU time, in ns
// (float64 bits; 0: not measured yet).
type Estimate struct {
	ns   atomic.Uint64
	best atomic.Uint64 // lowest ns has been (the slowdown, bandwidth.go)
}

func (e *Estimate) get() float64 { return math.Float64frombits(e.ns.Load()) }

func (e *Estimate) add(ns float64) {
	ns = max(ns, 1) // measured, if at 0 ns: distinct from "not measured yet"
	for {
		old := e.ns.Load()
		v := ns
		if old != 0 {
			v = math.Float64frombits(old)*(1-ewmaWeight) + ns*ewmaWeight
		}
		if e.ns.CompareAndSwap(old, math.Float64bits(v)) {
			return
		}
	}
}

// Estimates is a kernel's estimates per launch shape.
type Estimates struct {
	m    sync.Map // [6]uint32 launch shape -> *Estimate
	last atomic.Pointer[shapeEstimate]
}

type shapeEstimate struct {
	key [6]uint32
	e   *Estimate
}

// For is the estimate of launches of grid x block. The shape last asked
// for is found without the map (a map key boxed into an interface
// allocates: one allocation per metered launch otherwise).
func (es *Estimates) For(grid, block cuda.Dim3) *Estimate {
	key := [6]uint32{grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z}
	if l := es.last.Load(); l != nil && l.key == key {
		return l.e
	}
	var e *Estimate
	if v, ok := es.m.Load(key); ok {
		e = v.(*Estimate)
	} else {
		v, _ := es.m.LoadOrStore(key, new(Estimate))
		e = v.(*Estimate)
	}
	es.last.Store(&shapeEstimate{key: key, e: e})
	return e
}
