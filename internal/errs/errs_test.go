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
