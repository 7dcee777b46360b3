// Package teardown is how what a pool or a tenant made is let go: a
// pool's parts besides its tenants in the one order that is safe (what
// holds device resources before the device's context, the memory tracker
// before the shared region it reads), and the functions a tenant's owner
// registered to run when it closes (fcsp's Tenant.OnClose): each once, in
// the order registered, a panic turned into an error, since the close must
// go on and give everything back. fcsp chooses the thread and context
// they run on.
package teardown

import (
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/devmem"
	"github.com/fcsp-go/fcsp-go/internal/event"
	"github.com/fcsp-go/fcsp-go/internal/hostwait"
	"github.com/fcsp-go/fcsp-go/internal/shm"
	"github.com/fcsp-go/fcsp-go/internal/smmove"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
	"github.com/fcsp-go/fcsp-go/internal/smprobe"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// Pool is what a pool made besides its tenants. Dev, Moves and Mem are
// nil where the pool's Open failed before making them; Shared is nil
// without a shared region.
type Pool struct {
	Drv     cuda.Driver
	Dev     *smpart.Device
	Probe   *smprobe.Kernel // ProbeSMs's kernel, loaded or not
	Moves   *smmove.Engine  // the moves of SMs: their controller, the commons
	Spare   *smpart.Spares  // the spare partitions, which the pool no longer hands out
	Events  *event.Set
	Peers   *devmem.Peers
	Blocker *hostwait.Blocker // the host waits' events; nil where Dev is
	Mem     *memtrack.Tracker
	Shared  *shm.Member
}

// Close closes p's parts once the pool's tenants are closed: the probe's
// module, the move engine (its controller stopped, the commons let go),
// the spare partitions, the events, kept memory pools and host waits'
// events (with the primary context, before it goes), the tracker, the
// shared region, and the device. It closes every part whatever the others
// answer, and joins their errors.
func (p Pool) Close() error {
	var errs []error
	if p.Probe != nil {
		errs = append(errs, p.Probe.Close(p.Dev))
	}
	if p.Moves != nil {
		errs = append(errs, p.Moves.Close())
	}
	errs = append(errs, p.Spare.Close())
	if p.Dev != nil {
		errs = append(errs, p.Events.Close(p.Drv, p.Dev.Primary()), p.Peers.Close(p.Drv, p.Dev.Primary()), p.Blocker.Close())
	}
	if p.Mem != nil {
		// Before the region goes: the tracker then never reads it again
		// (a scrape racing this Close reads zeros, not an unmapped page).
		// The tenants closed before gave everything back; what is left is
		// a bug, reported.
		if leaked, err := p.Mem.Close(); err != nil || leaked != 0 {
			errs = append(errs, err)
			if leaked != 0 {
				errs = append(errs, fmt.Errorf("fcsp: %d bytes still counted after every tenant closed", leaked))
			}
		}
	}
	errs = append(errs, p.Shared.Close())
	if p.Dev != nil {
		errs = append(errs, p.Dev.Close())
	}
	return errors.Join(errs...)
}
