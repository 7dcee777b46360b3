package cuda

import (
	"errors"
	"fmt"
	"testing"
)

// StickyIn finds a sticky error anywhere in a joined tree, past a plain
// driver error that comes first, and nothing where there is none.
func TestStickyIn(t *testing.T) {
	sticky := &Error{Op: "cuLaunchKernel", Code: ErrorIllegalAddress}
	plain := &Error{Op: "cuMemFree_v2", Code: ErrorInvalidValue}
	err := errors.Join(fmt.Errorf("stream: %w", plain), fmt.Errorf("close: %w", errors.Join(errors.New("x"), sticky)))
	if got := StickyIn(err); got != sticky {
		t.Fatalf("StickyIn = %v; want %v", got, sticky)
	}
	if got := StickyIn(errors.Join(plain, errors.New("x"))); got != nil {
		t.Fatalf("StickyIn of no sticky error = %v", got)
	}
	if StickyIn(nil) != nil {
		t.Fatal("StickyIn(nil) != nil")
	}
}
