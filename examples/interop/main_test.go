//go:build cgo

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestInteropOnTheSimulator(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "C got the buffer") {
		t.Fatalf("output %q", out.String())
	}
	// Without a GPU it says, first, that the device is the simulator's.
	if line, _, _ := strings.Cut(out.String(), "\n"); !strings.Contains(line, "simulated") {
		t.Fatalf("first line %q does not say the device is simulated", line)
	}
	if !strings.Contains(out.String(), "[simulated]") {
		t.Fatalf("the handles' line does not name the simulated device: %q", out.String())
	}
}
