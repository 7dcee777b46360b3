package stream

import (
	"fmt"
	"strconv"
	"strings"
)

// Class is the kind of work a stream carries.
type Class uint8

const (
	// Default is ordinary compute: full throttling.
	Default Class = iota
	// Attention marks memory-bound attention kernels: 20% less throttling.
	Attention
	// Memcpy marks copy work: 50% less throttling.
	Memcpy
	// NCCL marks collective communication: never throttled.
	NCCL
	numClasses
)

// scale is the fraction of a kernel's cost each class is charged.
var scale = [numClasses]float64{Default: 1.0, Attention: 0.8, Memcpy: 0.5, NCCL: 0}

var names = [numClasses]string{Default: "default", Attention: "attention", Memcpy: "memcpy", NCCL: "nccl"}

// ThrottleScale is the fraction of a launch's computed cost that a stream of
// this class is charged: 1 for Default, 0.8 for Attention, 0.5 for Memcpy and
// 0 for NCCL. An unknown class is charged in full.
func (c Class) ThrottleScale() float64 {
	if c >= numClasses {
		return 1
	}
	return scale[c]
}

// Bypass reports whether launches on this class skip the rate limiter
// entirely (they are not even counted against a bucket).
func (c Class) Bypass() bool { return c == NCCL }

// Valid reports whether c is one of the defined classes.
func (c Class) Valid() bool { return c < numClasses }

func (c Class) String() string {
	if c >= numClasses {
		return fmt.Sprintf("class(%d)", uint8(c))
	}
	return names[c]
}

// Parse turns a class name ("default", "attention", "memcpy", "nccl"; case
// insensitive) into a Class.
func Parse(s string) (Class, error) {
	for i, n := range names {
		if strings.EqualFold(s, n) {
			return Class(i), nil
		}
	}
	return Default, fmt.Errorf("stream: unknown class %q (want one of %s)", s, strings.Join(names[:], ", "))
}

// MarshalText writes c's name (String), so that JSON and other text
// encodings show classes as the metrics' class label does, maps keyed by
// Class included (Stats.GPUTimeByClass), not as numbers. It never fails: a
// class outside the defined ones is written "class(N)".
func (c Class) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads a class's name as Parse does, or a defined class's
// number, which releases before MarshalText wrote as map keys.
func (c *Class) UnmarshalText(b []byte) error {
	s := string(b)
	if n, err := strconv.ParseUint(s, 10, 8); err == nil {
		if !Class(n).Valid() {
			return fmt.Errorf("stream: unknown class %d (want one of %s, or 0 to %d)", n, strings.Join(names[:], ", "), numClasses-1)
		}
		*c = Class(n)
		return nil
	}
	p, err := Parse(s)
	if err != nil {
		return err
	}
	*c = p
	return nil
}
