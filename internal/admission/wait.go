package admission

import (
	"context"
	"errors"

	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// How an admission waits for its price: its waiter, chosen once in
// NewTenant. A plain waiter waits for the tokens; a floored tenant's
// (floorWait) also ends a wait at the floor when the latency tenants go
// idle, and prices the work again at its full share.
type waiter interface {
	// wait prices j under p (quote) and takes the price from b, waiting;
	// it prices again whenever a change wakes the wait.
	wait(ctx context.Context, p pricer, b *tokenbucket.Stream, j job) (charge, error)
}

// plain waits for the tokens, at the price the limit sets.
type plain struct{}

func (plain) wait(ctx context.Context, p pricer, b *tokenbucket.Stream, j job) (charge, error) {
	var w tokenbucket.Waiting
	var c charge
	quote(p, b, j, &c)
	err := waitQuoted(ctx, p, b, j, &c, &w)
	return c, err
}

// waitQuoted waits on b for the price in c, j's. The price depends on the
// share (a GPU share's is 0 at share 1, the launch-rate model's penalty
// falls as the limit rises), so when a change of share wakes the wait
// (tokenbucket.ErrLimitChanged) j is priced again into c rather than
// waiting out the old share's price; w counts it as one wait.
func waitQuoted(ctx context.Context, p pricer, b *tokenbucket.Stream, j job, c *charge, w *tokenbucket.Waiting) error {
	for {
		err := w.Wait(ctx, b, c.total(), c.mark)
		if err == nil {
			c.mark = w.Mark() // what the charge was taken under (tokenbucket.Mark)
		}
		if err != tokenbucket.ErrLimitChanged {
			return err
		}
		quote(p, b, j, c)
	}
}

// floorWait is the waiter of a tenant with a bandwidth floor (floor.go):
// plain's, but a wait at the floor ends when the pool's latency tenants go
// idle, and the work is then priced again at its full share.
type floorWait struct{ pool *Pool }

func (f floorWait) wait(ctx context.Context, p pricer, b *tokenbucket.Stream, j job) (charge, error) {
	var w tokenbucket.Waiting
	idle := f.pool.idleChan() // before the price looks at busy: a fall to 0 after this closes it
	var c charge
	quote(p, b, j, &c)
	switch {
	case c.floor == 0:
		err := waitQuoted(ctx, p, b, j, &c, &w)
		return c, err
	case b.TryAcquireMark(c.total(), &c.mark): // no wait: no watcher needed
		return c, nil
	}
	woken, err := untilIdle(ctx, idle, func(wctx context.Context) error {
		return waitQuoted(wctx, p, b, j, &c, &w)
	})
	if woken {
		quote(p, b, j, &c) // the latency tenants went idle
		err = waitQuoted(ctx, p, b, j, &c, &w)
	}
	return c, err
}

// untilIdle runs wait under a context that also ends when idle closes (the
// pool's latency tenants went idle). woken says it ended for that reason
// and not ctx's: the caller then prices its admission again, at its full
// share.
func untilIdle(ctx context.Context, idle <-chan struct{}, wait func(context.Context) error) (woken bool, err error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-idle:
			cancel()
		case <-stop:
		}
	}()
	err = wait(wctx)
	return errors.Is(err, context.Canceled) && ctx.Err() == nil, err
}
