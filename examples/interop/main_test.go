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
}
