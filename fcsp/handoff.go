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

// The commons hands over too: SMs a partition takes from the unpartitioned
// tenants still run the work they queued before. A growth claims its new
// SMs first (Claim), so that the commons leaves them while the growing
// tenant's calls go on, and then waits for that work with the rest; a new
// partition waits for it before NewTenant returns.

// Hand-over timing: how often a growing Reshape (or NewTenant) looks
// whether the givers' queued work has run, and how long it waits at most. The bound is there
// because a giver may queue seconds of kernels, and a tenant growing for a
// burst must not sit on its floor that long; twice the longest hand-over
// measured in run A2. A pool keeps its own copy (Pool.handOff), which a
// test that races the wait lengthens before it makes tenants.
const (
	handOffPoll = 50 * time.Microsecond
	handOffMax  = 15 * time.Millisecond
)

// prepareGrowth readies a Reshape of c to sms SMs, more than it holds: it
// claims the SMs the growth adds, moves the unpartitioned tenants off them,
// and waits for the work queued on SMs given up (awaitHandOff). On an
// error nothing has changed: the claim is given back and the commons
// follows the split again. The caller holds c.reshape, not c's calls.
func (c *tenantCore) prepareGrowth(ctx context.Context, sms int) error {
	if err := c.place.Claim(sms); err != nil {
		return err
	}
	err := c.pool.followSplit()
	if err == nil {
		err = c.awaitHandOff(ctx)
	}
	if err != nil {
		c.unclaim()
	}
	return err
}

// unclaim gives back what prepareGrowth claimed and no Reshape used, and
// lets the unpartitioned tenants back onto it.
func (c *tenantCore) unclaim() {
	c.place.Unclaim()
	c.pool.released()
}

// awaitHandOff waits, at most the pool's handOff (handOffMax), until the
// work queued before SMs changed hands has run: the pool's other
// partitions', queued before their last Reshape gave SMs up, and the
// commons', queued before its last move left SMs (hand-over events
// reached); ctx's error, nothing changed, if ctx ends first. Its callers
// (a growing Reshape, under c.reshape; NewTenant, before it returns c)
// hold none of c's calls: they go on, on the SMs c holds, while it waits.
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
	commons := p.commons != nil && !partGaveDrained(p.commons)
	for deadline := time.Now().Add(p.handOff); (len(givers) > 0 || commons) && time.Now().Before(deadline); {
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(handOffPoll)
		givers = slices.DeleteFunc(givers, gaveDrained)
		commons = commons && !partGaveDrained(p.commons)
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
	return !ok || answered(ask(g.Part))
}

// partGaveDrained is GaveDrained's answer for part (the commons).
func partGaveDrained(part *smpart.Partition) bool { return answered(part.GaveDrained()) }

// answered is true where the work is done or the partition answers an
// error (a lost device, closed): nothing is left to wait for.
func answered(done bool, err error) bool { return done || err != nil }
