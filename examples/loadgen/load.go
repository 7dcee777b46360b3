package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// load is how hard to drive the server, and for how long.
type load struct {
	duration           time.Duration
	maxRequests        int64   // all classes together
	batchWorkers       int     // closed-loop batch workers (0: no batch load)
	interactiveRate    float64 // requests/s, open loop; 0: closed loop
	interactiveWorkers int     // closed-loop workers, or the most in flight at a fixed rate
	timeout            time.Duration
	warmup             time.Duration // the same load first, for this long, not recorded (0: none)
}

// recorder collects one class's results.
type recorder struct {
	mu   sync.Mutex
	lat  []time.Duration
	errs int
	last string // the last error, for the log
}

func (r *recorder) add(d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs++
		r.last = err.Error()
		return
	}
	r.lat = append(r.lat, d)
}

// driver sends requests to one server.
type driver struct {
	base   string // http://host:port
	client *http.Client
	budget atomic.Int64 // requests left
}

func newDriver(addr string, l load) *driver {
	d := &driver{base: "http://" + addr, client: &http.Client{
		Timeout: l.timeout,
		Transport: &http.Transport{
			// Keep a connection per worker so that no request waits for a
			// dial (or for a connection another class holds).
			MaxIdleConnsPerHost: l.batchWorkers + l.interactiveWorkers + 4,
		},
	}}
	d.budget.Store(l.maxRequests)
	return d
}

// take claims one request of the budget.
func (d *driver) take() bool { return d.budget.Add(-1) >= 0 }

// post sends one request and returns its latency; a non-200 is an error.
func (d *driver) post(ctx context.Context, class string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.base+"/v1/"+class, http.NoBody)
	if err != nil {
		return err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", class, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// run drives both classes until the duration or the request budget runs
// out, and summarises them.
func (d *driver) run(ctx context.Context, l load) (Row, error) {
	if l.warmup > 0 {
		// A fresh server's first requests pay for lazy module loading,
		// first allocations and, under a GPU share, first launches charged
		// a whole refill period: not what a P99 of the steady state should
		// hold. The warm-up's requests come out of no budget.
		left := d.budget.Load()
		var inter, batch recorder
		d.drive(ctx, l, l.warmup, &inter, &batch)
		d.budget.Store(left)
	}
	var inter, batch recorder
	elapsed := d.drive(ctx, l, l.duration, &inter, &batch)
	row := Row{Seconds: elapsed.Seconds(),
		Interactive: summarize(inter.lat, inter.errs, elapsed), Batch: summarize(batch.lat, batch.errs, elapsed)}
	if l.batchWorkers == 0 {
		row.BatchNote = "no batch load"
	}
	// Failed requests are results (a 429 under load is the quota working),
	// so they are counted and the last one kept, not returned as an error.
	row.Interactive.LastError, row.Batch.LastError = inter.last, batch.last
	return row, nil
}

// drive runs both classes for d (or until the budget runs out) into the
// recorders and returns how long it ran.
func (d *driver) drive(ctx context.Context, l load, dur time.Duration, inter, batch *recorder) time.Duration {
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var wg sync.WaitGroup
	for range l.batchWorkers {
		wg.Go(func() { d.closedLoop(ctx, "batch", batch) })
	}
	if l.interactiveRate > 0 {
		wg.Go(func() { d.openLoop(ctx, l.interactiveRate, l.interactiveWorkers, inter) })
	} else {
		for range l.interactiveWorkers {
			wg.Go(func() { d.closedLoop(ctx, "interactive", inter) })
		}
	}
	start := time.Now()
	wg.Wait()
	elapsed := time.Since(start)
	// Connections dialled for requests the end of the run cancelled would
	// otherwise sit unused, and delay the server's graceful shutdown.
	d.client.CloseIdleConnections()
	return elapsed
}

// closedLoop sends the next request when the last one is answered.
func (d *driver) closedLoop(ctx context.Context, class string, rec *recorder) {
	for ctx.Err() == nil && d.take() {
		t0 := time.Now()
		err := d.post(ctx, class)
		if ctx.Err() != nil {
			return // cut off by the end of the run: neither a sample nor an error
		}
		rec.add(time.Since(t0), err)
	}
}

// openLoop sends interactive requests at a fixed rate, each timed from when
// it was due rather than when it was sent, so that a stalled server shows
// up in the latencies instead of silently lowering the rate (coordinated
// omission). At most inflight requests are outstanding; past that a due
// request waits, and its wait counts.
func (d *driver) openLoop(ctx context.Context, rate float64, inflight int, rec *recorder) {
	interval := time.Duration(float64(time.Second) / rate)
	sem := make(chan struct{}, max(inflight, 1))
	var wg sync.WaitGroup
	defer wg.Wait()
	due := time.Now()
	for d.take() {
		if !sleepUntil(ctx, due) {
			return
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		sent := due // this request's due time: the loop moves due on
		wg.Go(func() {
			defer func() { <-sem }()
			err := d.post(ctx, "interactive")
			if ctx.Err() == nil {
				rec.add(time.Since(sent), err)
			}
		})
		due = due.Add(interval)
	}
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// healthz is the part of the server's GET /healthz that labels a row.
type healthz struct {
	Status    string `json:"status"`
	Mode      string `json:"mode"`
	Device    string `json:"device"`
	Simulated bool   `json:"simulated"`
}

func (d *driver) health(ctx context.Context) (healthz, error) {
	var h healthz
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/healthz", nil)
	if err != nil {
		return h, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return h, fmt.Errorf("healthz: %s", resp.Status)
	}
	return h, json.NewDecoder(resp.Body).Decode(&h)
}
