package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/examples/workload"
	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// threadsPerBlock is the chain kernel's block size (as in day94).
const threadsPerBlock = 256

// lane is one stream with its reusable launch arguments. A request holds a
// lane from launch to synchronize, so Synchronize waits for its own kernel
// only, not for the kernels of other requests of the class.
type lane struct {
	stream *fcsp.Stream
	args   fcsp.Args
}

// class is a request class bound to its tenant.
type class struct {
	name   string
	cfg    classConfig
	tenant *fcsp.Tenant
	fn     *fcsp.Function
	lanes  chan *lane // free lanes; its capacity bounds the class's requests on the GPU
	verify int
	m      *metrics
	log    *slog.Logger
	gate   <-chan struct{} // tests: a request holding a lane waits here

	// Requests waiting for a lane, and holding one (on the GPU, or waiting
	// for the tenant's tokens): the model-server protocol's queued and
	// running requests (metrics.go).
	waiting, running atomic.Int64
}

// newClass makes the class's tenant, loads the kernel into it and makes one
// stream per lane.
func newClass(pool *fcsp.Pool, name string, cfg classConfig, verify int, m *metrics, log *slog.Logger, opts ...fcsp.TenantOption) (_ *class, err error) {
	t, err := pool.NewTenant(name, opts...)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, t.Close())
		}
	}()
	fn, err := workload.Kernel(t, "chain")
	if err != nil {
		return nil, err
	}
	c := &class{name: name, cfg: cfg, tenant: t, fn: fn, lanes: make(chan *lane, cfg.Streams), verify: verify, m: m, log: log}
	for i := 0; i < cfg.Streams; i++ {
		s := t.Stream()
		if i > 0 {
			// Streams live as long as the tenant: Close destroys them.
			if s, err = t.NewStream(fcsp.ClassDefault); err != nil {
				return nil, err
			}
		}
		c.lanes <- &lane{stream: s}
	}
	return c, nil
}

// request is the optional JSON body of a request.
type request struct {
	N int `json:"n,omitempty"` // elements; 0: the class's default
}

// response is what a successful request returns.
type response struct {
	Class     string  `json:"class"`
	N         int     `json:"n"`
	Steps     int     `json:"steps"`
	SMs       int     `json:"sms"`
	Verified  int     `json:"verified"`   // elements checked against the closed form
	QueueMs   float64 `json:"queue_ms"`   // waiting for a free stream
	LaunchMs  float64 `json:"launch_ms"`  // in Launch: the rate limiter's wait and the launch
	KernelMs  float64 `json:"kernel_ms"`  // in Synchronize: the kernel running
	LatencyMs float64 `json:"latency_ms"` // the whole request, as the server saw it
}

// errorBody is what a failed request returns.
type errorBody struct {
	Class string `json:"class"`
	Error string `json:"error"`
}

// ServeHTTP runs one request: allocate, launch, synchronize, verify, free.
func (c *class) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(c.cfg.Timeout))
	defer cancel()
	resp, status, err := c.serve(ctx, w, r, start)
	took := time.Since(start)
	c.m.observe(c.name, status, took)
	if err != nil {
		// Failures are worth a line each (successes only when debugging),
		// but a client that hung up is its own business, not a warning.
		lvl := slog.LevelWarn
		if r.Context().Err() != nil {
			lvl = slog.LevelInfo
		}
		c.log.Log(ctx, lvl, "request failed", "class", c.name, "status", status, "ms", ms(took), "err", err)
		writeJSON(w, status, errorBody{Class: c.name, Error: err.Error()})
		return
	}
	c.log.Debug("request", "class", c.name, "n", resp.N, "ms", ms(took), "launch_ms", resp.LaunchMs)
	resp.LatencyMs = ms(time.Since(start))
	writeJSON(w, status, resp)
}

func (c *class) serve(ctx context.Context, w http.ResponseWriter, r *http.Request, start time.Time) (response, int, error) {
	n, err := c.size(w, r)
	if err != nil {
		return response{}, http.StatusBadRequest, err
	}
	resp := response{Class: c.name, N: n, Steps: c.cfg.Steps, SMs: c.tenant.SMs()}
	c.waiting.Add(1)
	ln, err := c.acquire(ctx)
	c.waiting.Add(-1)
	if err != nil {
		return resp, statusOf(err), fmt.Errorf("waiting for a free stream: %w", err)
	}
	c.running.Add(1)
	defer func() {
		c.running.Add(-1)
		c.lanes <- ln
	}()
	resp.QueueMs = ms(time.Since(start))
	if err := c.run(ctx, ln, n, &resp); err != nil {
		return resp, statusOf(err), err
	}
	return resp, http.StatusOK, nil
}

// size reads the optional body, one JSON object and nothing after it; an
// empty body asks for the default size.
func (c *class) size(w http.ResponseWriter, r *http.Request) (int, error) {
	var req request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10))
	err := dec.Decode(&req)
	if err == nil {
		if _, terr := dec.Token(); !errors.Is(terr, io.EOF) {
			err = errors.New("data after the JSON object")
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("request body: %w", err)
	}
	switch {
	case req.N == 0:
		return c.cfg.N, nil
	case req.N < 0 || req.N > 1<<31-1:
		return 0, fmt.Errorf("n %d: want 1 up to %d", req.N, 1<<31-1)
	case c.cfg.MaxN > 0 && req.N > c.cfg.MaxN:
		return 0, fmt.Errorf("n %d: this class allows at most %d", req.N, c.cfg.MaxN)
	}
	return req.N, nil
}

func (c *class) acquire(ctx context.Context) (*lane, error) {
	select {
	case ln := <-c.lanes:
		return ln, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run does the GPU work of one request on lane ln.
func (c *class) run(ctx context.Context, ln *lane, n int, resp *response) (err error) {
	buf, err := c.tenant.AllocAsync(ln.stream, uint64(4*n))
	if err != nil {
		return err
	}
	defer func() {
		if ferr := c.tenant.FreeAsync(ln.stream, buf); ferr != nil && !errors.Is(ferr, fcsp.ErrClosed) {
			err = errors.Join(err, ferr)
		}
	}()
	if c.gate != nil {
		select {
		case <-c.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ln.args.Reset().Ptr(buf).Int32(int32(n)).Int32(int32(c.cfg.Steps))
	grid := fcsp.Dim3{X: uint32((n + threadsPerBlock - 1) / threadsPerBlock), Y: 1, Z: 1}
	block := fcsp.Dim3{X: threadsPerBlock, Y: 1, Z: 1}
	t0 := time.Now()
	// Launch waits for the tenant's tokens while honouring ctx: a throttled
	// request whose deadline passes gives up without launching.
	if err := ln.stream.Launch(ctx, c.fn, grid, block, 0, &ln.args); err != nil {
		return err
	}
	launched := time.Now()
	c.m.launchWait.WithLabelValues(c.name).Observe(launched.Sub(t0).Seconds())
	// The class's deadline bounds the wait for the kernel too (it runs on
	// to its end; the lane's next request queues behind it).
	if err := ln.stream.SynchronizeContext(ctx); err != nil {
		return err
	}
	resp.LaunchMs, resp.KernelMs = ms(launched.Sub(t0)), ms(time.Since(launched))
	resp.Verified, err = c.check(buf, n)
	return err
}

// check copies back only a prefix of the result: enough to catch a wrong
// kernel or a corrupted buffer without paying for a full copy per request.
func (c *class) check(buf fcsp.DevicePtr, n int) (int, error) {
	k := min(c.verify, n)
	if k == 0 {
		return 0, nil
	}
	out := make([]byte, 4*k)
	if err := c.tenant.CopyFromDevice(out, buf); err != nil {
		return 0, err
	}
	if err := kernels.CheckChain(out, c.cfg.Steps); err != nil {
		return 0, err
	}
	return k, nil
}

// statusOf maps SDK errors to HTTP: an over-quota request may succeed once
// other requests free their memory (429); a deadline or a closing tenant
// means the server could not serve it now (503).
func statusOf(err error) int {
	switch {
	case errors.Is(err, fcsp.ErrQuotaExceeded):
		return http.StatusTooManyRequests
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), errors.Is(err, fcsp.ErrClosed),
		errors.Is(err, fcsp.ErrDeviceLost): // lost: /healthz fails and the process is replaced
		return http.StatusServiceUnavailable
	case errors.Is(err, fcsp.ErrInvalidArgument):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
