package teardown

import (
	"errors"
	"log/slog"
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

func TestReclaimedLevels(t *testing.T) {
	for _, tc := range []struct {
		why   string
		leaks int
		want  string // "" : nothing logged
	}{
		{"", 0, ""},
		{"", 2, "level=WARN"},
		{"tenant handle garbage-collected without Close", 0, "level=WARN"},
		{PoolClosed, 0, "level=INFO"},
		{PoolClosed, 1, "level=WARN"},
	} {
		var b strings.Builder
		Reclaimed(slog.New(slog.NewTextHandler(&b, nil)), "a", tc.why, tc.leaks)
		if tc.want == "" {
			if b.Len() != 0 {
				t.Errorf("why %q, %d leaks: logged %q, want nothing", tc.why, tc.leaks, b.String())
			}
			continue
		}
		if !strings.Contains(b.String(), tc.want) || !strings.Contains(b.String(), "tenant reclaimed") {
			t.Errorf("why %q, %d leaks: logged %q, want %s", tc.why, tc.leaks, b.String(), tc.want)
		}
	}
}
