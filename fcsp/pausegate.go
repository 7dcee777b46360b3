package fcsp

import (
	"context"
	"sync"
	"sync/atomic"
)

// pauseGate lets Tenant.Reshape hold a tenant's new calls back while it
// drains those in flight and switches streams, so that no call queues work
// on a stream handle that is being replaced. The calls' fast path reads one
// atomic bool.
type pauseGate struct {
	held atomic.Bool
	mu   sync.Mutex
	cond *sync.Cond
}

// wait blocks while the gate is held.
func (g *pauseGate) wait() {
	if !g.held.Load() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.held.Load() {
		g.cond.Wait()
	}
}

// pause holds new calls back and waits for those in flight. It returns
// ErrClosed, holding nothing, once end has begun, and ctx's error, holding
// nothing, if ctx ends first. Pauses are serialised by the caller.
func (l *lifeLock) pause(ctx context.Context) error {
	g := &l.gate
	g.mu.Lock()
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	g.held.Store(true)
	g.mu.Unlock()
	if l.ending.Load() {
		l.resume()
		return ErrClosed
	}
	if !l.drain(ctx) {
		l.resume()
		return ctx.Err()
	}
	return nil
}

// resume lets the held calls in.
func (l *lifeLock) resume() {
	g := &l.gate
	g.mu.Lock()
	g.held.Store(false)
	g.cond.Broadcast()
	g.mu.Unlock()
}
