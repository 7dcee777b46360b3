package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The demo runs to the end on the simulator.
func TestRunsOnTheSimulator(t *testing.T) {
	require.NoError(t, run(true, 60*time.Millisecond, 2*time.Millisecond, 50*time.Microsecond, 2))
}
