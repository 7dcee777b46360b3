package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// On the simulator the demo lasts about its three phases and shows what it
// promises: the interactive class grows to 32 SMs in the burst and is back
// at 8 when the last phase ends. (Before the simulator's model, kernels ran
// on the CPU at one speed whatever the SMs: growing changed nothing, the
// queue followed the host's load, the backlog drained for half a minute
// after 2 s phases, and the table showed "after 8-32" or "after 32".)
func TestGrowsAndShrinksInItsPhasesOnTheSimulator(t *testing.T) {
	const phase = 400 * time.Millisecond
	var out bytes.Buffer
	t0 := time.Now()
	rep, err := run(context.Background(), &out, config{sim: true, phase: phase, calm: 2 * time.Millisecond, grow: 4})
	took := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	rep.write(&out)
	t.Log(out.String())
	if !rep.Simulated {
		t.Fatal("not simulated")
	}
	if took > 3*phase+2*time.Second {
		t.Errorf("took %v for three phases of %v", took, phase)
	}
	if b := rep.Phases[1]; b.MaxSMs != big || b.AtBig < 0.5 {
		t.Errorf("burst: interactive SMs %d-%d, at %d for %.0f%% of it; want mostly %d", b.MinSMs, b.MaxSMs, big, 100*b.AtBig, big)
	}
	if a := rep.Phases[2]; a.EndSMs != small {
		t.Errorf("after: interactive ends at %d SMs, want %d (shrunk back)", a.EndSMs, small)
	}
	if rep.Phases[0].Requests == 0 || rep.Phases[1].Requests <= rep.Phases[0].Requests {
		t.Errorf("requests %d before, %d in the burst", rep.Phases[0].Requests, rep.Phases[1].Requests)
	}
	if s := out.String(); !strings.Contains(s, "simulated device") || !strings.Contains(s, "shrink when drained") {
		t.Errorf("output lacks the simulator caveat or a shrink:\n%s", s)
	}
}
