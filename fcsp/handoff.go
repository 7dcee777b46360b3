package fcsp

import (
	"context"
	"slices"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// The hand-over: SMs one partition gives up in a Reshape still run the
// work it queued before (a Reshape does not wait for it), so a partition
// that grows onto them would share them with that work. A growing Reshape
// waits for it first, bounded, with its own calls going on meanwhile on
// the SMs it holds. Measured on an H100 (runs C2, E1): the controller
// growing at once onto SMs still running two queued batch GEMMs took the
// 300 ms / 100 ms bursts' P99 to 591-715 µs; waiting for them, 505-515 µs.

// Hand-over timing: how often a growing Reshape looks whether the givers'
// queued work has run, and how long it waits at most. The bound is there
// because a giver may queue seconds of kernels, and a tenant growing for a
// burst must not sit on its floor that long; twice the longest hand-over
// measured in run A2. A pool keeps its own copy (Pool.handOff), which a
// test that races the wait lengthens before it makes tenants.
const (
	handOffPoll = 50 * time.Microsecond
	handOffMax  = 15 * time.Millisecond
)

// awaitHandOff waits, at most the pool's handOff (handOffMax), until the
// work the pool's other partitions queued before their last Reshape gave
// SMs up has run (their hand-over events reached); ctx's error, nothing
// changed, if ctx ends first. The caller (Reshape) holds c.reshape but has not paused c's
// calls: they go on, on the SMs c holds, while it waits.
func (c *tenantCore) awaitHandOff(ctx context.Context) error {
	p := c.pool
	list := coreLists.Get().(*[]*tenantCore)
	p.mu.Lock()
	cores := p.cores((*list)[:0])
	p.mu.Unlock()
	defer func() {
		clear(cores) // a pooled list must not keep closed tenants reachable
		*list = cores[:0]
		coreLists.Put(list)
	}()
	givers := slices.DeleteFunc(cores, func(o *tenantCore) bool { return o == c || gaveDrained(o) })
	for deadline := time.Now().Add(p.handOff); len(givers) > 0 && time.Now().Before(deadline); {
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(handOffPoll)
		givers = slices.DeleteFunc(givers, gaveDrained)
	}
	return nil
}

// drained reports whether the work queued before c's last Reshape has
// run; gaveDrained, the work on the SMs that Reshape gave up (true where
// it gave none). Both are true where c is not a partition, and where the
// partition answers an error (a lost device): nothing is left to wait for.
func drained(c *tenantCore) bool     { return partDrained(c, (*smpart.Partition).Drained) }
func gaveDrained(c *tenantCore) bool { return partDrained(c, (*smpart.Partition).GaveDrained) }

// partDrained is ask's answer for c's partition, true where c has none.
func partDrained(c *tenantCore, ask func(*smpart.Partition) (bool, error)) bool {
	g, ok := c.place.Placement.(place.Green)
	if !ok {
		return true
	}
	done, err := ask(g.Part)
	return done || err != nil
}
