package main

import (
	"context"
	"os"
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

func TestPlotDrawsTheSchedules(t *testing.T) {
	path := t.TempDir() + "/day94.png"
	s := []Schedule{{"alone-batch", 132, 0, 0, 1.27}, {"shared (two streams)", 132, 132, 1.57, 1.575}, {"partitioned (two green contexts)", 64, 64, 0.514, 2.567}}
	if err := savePlot(path, s); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() < 1000 {
		t.Fatalf("no plot written: %v", err)
	}
	if p := os.Getenv("FCSP_KEEP_PLOT"); p != "" {
		_ = savePlot(p, s)
	}
}
