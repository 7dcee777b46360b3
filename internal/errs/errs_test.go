package errs

import (
	"errors"
	"fmt"
	"testing"
)

func TestNewMatchesItselfAndItsParent(t *testing.T) {
	size := New("memtrack: invalid allocation size", ErrInvalidArgument)
	err := fmt.Errorf("%w: 0 bytes", size)
	if !errors.Is(err, size) || !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("%v: want both identities", err)
	}
	if errors.Is(err, ErrClosed) {
		t.Fatalf("%v matches ErrClosed", err)
	}
	if other := New("memtrack: invalid allocation size", ErrInvalidArgument); errors.Is(err, other) {
		t.Fatal("two sentinels with one message must stay distinct")
	}
	if size.Error() != "memtrack: invalid allocation size" {
		t.Fatalf("message %q", size.Error())
	}
}

// TestSentinelsAreDistinct: each sentinel matches itself alone, so one
// meaning never passes for another under errors.Is.
func TestSentinelsAreDistinct(t *testing.T) {
	all := []error{ErrClosed, ErrInvalidArgument, ErrDeviceLost, ErrNotComputed, ErrThrottled,
		ErrFewWorkQueues, ErrInsideDo, ErrStaleGraph, ErrNameTaken}
	for i, a := range all {
		for j, b := range all {
			if got := errors.Is(fmt.Errorf("wrapped: %w", a), b); got != (i == j) {
				t.Errorf("errors.Is(%q, %q) = %v", a, b, got)
			}
		}
	}
}

// ErrOutOfRange is a finer invalid argument, and nothing else.
func TestOutOfRangeIsAnInvalidArgument(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", ErrOutOfRange)
	if !errors.Is(err, ErrOutOfRange) || !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("%v: want ErrOutOfRange and ErrInvalidArgument", err)
	}
	for _, other := range []error{ErrClosed, ErrDeviceLost, ErrNotComputed, ErrThrottled, ErrFewWorkQueues, ErrInsideDo, ErrStaleGraph, ErrNameTaken} {
		if errors.Is(err, other) {
			t.Errorf("%v matches %v", err, other)
		}
	}
}
