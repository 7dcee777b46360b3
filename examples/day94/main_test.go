package main

import (
	"context"
	"testing"
)

// On a machine without a GPU the demo must still print the split table of
// the simulated H200, with every predicted row equal to the measured one.
func TestRunsOnTheSimulator(t *testing.T) {
	c := config{simulate: true, reps: 1, minCounts: []int{1, 8, 9, 64, 66, 200}}
	if err := run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}
