//go:build race

package memtrack

// raceEnabled: the storms run fewer operations under the race detector,
// which slows each one about tenfold; the full counts run without it.
const raceEnabled = true
