package teardown

import (
	"errors"
	"strings"
	"testing"
)

func TestRunOrderErrorsAndPanics(t *testing.T) {
	var order []int
	boom := errors.New("boom")
	err := Run([]func(int) error{
		func(c int) error { order = append(order, 1); return nil },
		func(c int) error { order = append(order, 2); panic("cleanup failed") },
		func(c int) error { order = append(order, c); return boom },
	}, 3)
	if len(order) != 3 || order[0] != 1 || order[1] != 2 || order[2] != 3 {
		t.Fatalf("ran %v, want [1 2 3]: each once, in order, past a panic", order)
	}
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "OnClose function panicked: cleanup failed") {
		t.Fatalf("err = %v, want boom and the panic joined", err)
	}
	if err := Run[int](nil, 0); err != nil {
		t.Fatalf("no hooks: %v", err)
	}
}
