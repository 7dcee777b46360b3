package fcsp

import (
	"context"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/life"
)

// lifeLock is the tenant's life.Lock (internal/life says how it counts
// calls in flight), under the names the tenant's files call it by.
type lifeLock struct{ life.Lock }

func (l *lifeLock) exit(slot uint32) { l.Exit(slot) }
func (l *lifeLock) end()             { l.End() }

// pause holds new calls back and waits for those in flight: ErrClosed once
// end has begun, ctx's error if ctx ends first; holding nothing then.
func (l *lifeLock) pause(ctx context.Context) error { return l.Pause(ctx) }
func (l *lifeLock) resume()                         { l.Resume() }

// enter admits a call while the tenant lives; ErrClosed once Close began.
// The caller passes the slot to c.life.exit when done.
func (c *tenantCore) enter() (uint32, error) {
	slot, ok := c.life.Enter(c.dos.Pinned) // pass: a call from inside a Do (or Capture) on its thread
	if !ok {
		if lost := c.pool.fault.err(); lost != nil && !c.closed.Load() {
			return 0, fmt.Errorf("tenant %q: %w", c.name, lost) // a Reset is under way
		}
		return 0, ErrClosed
	}
	if c.closed.Load() {
		c.life.exit(slot)
		return 0, ErrClosed
	}
	if lost := c.pool.fault.err(); lost != nil {
		c.life.exit(slot)
		return 0, fmt.Errorf("tenant %q: %w", c.name, lost)
	}
	return slot, nil
}
