package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// processStart is when this process's Go code began: a replacement's
// "running" mark.
var processStart = time.Now()

// stallResult is what a stall process prints as its "result" line.
type stallResult struct {
	Role      string `json:"role"`
	Work      string `json:"work"`
	Simulated bool   `json:"simulated,omitempty"`
	Device    string `json:"device,omitempty"`
	InterSMs  int    `json:"interactive_sms,omitempty"`
	StuckSMs  int    `json:"stuck_sms,omitempty"`
	BatchSMs  int    `json:"batch_sms,omitempty"`

	// The process holding the stuck kernel (server, spin).
	LaunchNs    int64      `json:"launch_unix_ns,omitempty"`
	LaunchUs    float64    `json:"launch_us,omitempty"`
	LaunchErr   string     `json:"launch_error,omitempty"`
	Stall       *StallSeen `json:"stall,omitempty"`
	Next        []NextCall `json:"next_calls,omitempty"`
	OtherStalls []string   `json:"other_stalls,omitempty"`

	// The measuring processes (server, interactive, batch).
	Windows    []StallWindow `json:"windows,omitempty"`
	Errors     int           `json:"failed_calls"`
	FirstError string        `json:"first_error,omitempty"`
	Hung       []string      `json:"hung,omitempty"`
	StormPerS  float64       `json:"storm_calls_per_s"`

	// The server's Pool.Shutdown.
	ShutdownStartNs int64  `json:"shutdown_start_unix_ns,omitempty"`
	ShutdownEndNs   int64  `json:"shutdown_end_unix_ns,omitempty"`
	ShutdownErr     string `json:"shutdown_error,omitempty"`
	ShutdownStalled bool   `json:"shutdown_is_err_stalled,omitempty"`
	ShutdownNamed   bool   `json:"shutdown_names_tenant,omitempty"`

	// The server's drain before Shutdown: how long, and where it waited
	// where it did not end within the Shutdown bound (left running).
	DrainMs   float64 `json:"drain_ms,omitempty"`
	DrainLeft string  `json:"drain_left,omitempty"`
}

// stackOf is the stack of the first goroutine whose stack names fn: where
// a call that never returned waits (a driver call names itself in its cgo
// frame).
func stackOf(fn string) string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			return g
		}
	}
	return "no goroutine names " + fn
}

// StallSeen is a stall as its process's watchdog reported it (the
// handler's fcsp.StallReport) and what Health and Stats said right after.
type StallSeen struct {
	Tenant          string  `json:"tenant"`
	Stream          string  `json:"stream"`
	Class           string  `json:"class"`
	Kernel          string  `json:"kernel"`
	Queued          uint64  `json:"queued"`
	SinceNs         int64   `json:"since_unix_ns"`
	FoundNs         int64   `json:"found_unix_ns"`
	HandledNs       int64   `json:"handled_unix_ns"` // the handler's call
	BoundMs         float64 `json:"bound_ms"`
	HealthNames     bool    `json:"health_names_it"`
	RestartRequired bool    `json:"restart_required"`
	Healthy         bool    `json:"healthy"`
	StatsStalled    bool    `json:"stats_stalled"`
}

// NextCall is one of the stalled tenant's calls after its stall.
type NextCall struct {
	Call    string  `json:"call"`
	Us      float64 `json:"us"`
	Stalled bool    `json:"err_stalled"`
	Err     string  `json:"error,omitempty"`
}

// StallWindow is the classes' figures over one window: the interactive
// requests that started in it (one still unfinished counts with its time
// so far), the batch GEMMs that ended in it, the calls that failed in it.
type StallWindow struct {
	FromNs      int64   `json:"from_unix_ns"`
	ToNs        int64   `json:"to_unix_ns"`
	Requests    int     `json:"interactive_requests"`
	Unfinished  int     `json:"unfinished,omitempty"`
	P50us       float64 `json:"p50_us"`
	P99us       float64 `json:"p99_us"`
	MaxUs       float64 `json:"max_us"`
	ReqPerS     float64 `json:"interactive_req_per_s"`
	BatchGEMMs  int64   `json:"batch_gemms"`
	BatchTFLOPs float64 `json:"batch_tflops"`
	Errors      int     `json:"failed_calls,omitempty"`
	FirstError  string  `json:"first_error,omitempty"`
}

// runStallRole is one process of the stall mode.
func runStallRole(ctx context.Context, cfg config, out, errw io.Writer) error {
	state := serverState(cfg.heapMiB)
	defer runtime.KeepAlive(state)
	switch cfg.stall.role {
	case "server":
		return stallServer(ctx, cfg, out, errw)
	case "spin":
		return stallSpinner(ctx, cfg, out, errw)
	case "replace":
		return stallReplacement(ctx, cfg, out, errw)
	}
	return stallClassRole(ctx, cfg, out, errw)
}

// stallEvent is one call of the stall handler.
type stallEvent struct {
	at time.Time
	r  fcsp.StallReport
}

// openStall opens the process's pool with the watchdog, its handler
// sending each report to the channel returned.
func openStall(ctx context.Context, cfg config, errw io.Writer, cublas bool, bound time.Duration) (*fcsp.Pool, workKind, chan stallEvent, error) {
	seen := make(chan stallEvent, 16)
	op := &opener{cfg: cfg, errw: errw, out: errw, extra: []fcsp.Option{fcsp.WithStallTimeout(bound),
		fcsp.WithStallHandler(func(r fcsp.StallReport) {
			select {
			case seen <- stallEvent{time.Now(), r}:
			default:
			}
		})}}
	have := cublas && loadCublas(&cfg, errw)
	pool, err := op.open(ctx)
	if err != nil {
		return nil, workKind{}, nil, err
	}
	return pool, workFor(pool, have), seen, nil
}

// stallServer is the sdk variant's server: the three tenants, both
// classes serving throughout, the stuck kernel after the first window,
// Shutdown after the second, then the exit. It never closes its pool
// but through Shutdown: the stuck kernel ends only with the process.
func stallServer(ctx context.Context, cfg config, out, errw io.Writer) error {
	sc := cfg.stall
	pool, wk, seen, err := openStall(ctx, cfg, errw, true, sc.bound)
	if err != nil {
		return err
	}
	res := stallResult{Role: "server", Work: wk.String(), Simulated: pool.Device().Simulated, Device: pool.Device().String()}
	var own []fcsp.TenantOption // the classes' own bound, where one is given
	if sc.classBound > 0 {
		own = append(own, fcsp.WithTenantStallTimeout(sc.classBound))
	}
	it, err := pool.NewTenant("interactive", append(own, fcsp.WithSMs(cfg.interSMs))...)
	if err != nil {
		return err
	}
	stuck, err := pool.NewTenant(stuckName, fcsp.WithSMs(sc.sms))
	if err != nil {
		return err
	}
	bt, err := pool.NewTenant("batch", append(own, fcsp.WithRestOfSMs())...)
	if err != nil {
		return err
	}
	inter, err := newClass(ctx, "interactive", it, false, sc.k, wk)
	if err != nil {
		return err
	}
	batch, err := newClass(ctx, "batch", bt, true, max(cfg.batchK, 2), wk)
	if err != nil {
		return err
	}
	spin, err := spinFunction(stuck)
	if err != nil {
		return err
	}
	res.InterSMs, res.StuckSMs, res.BatchSMs = it.SMs(), stuck.SMs(), bt.SMs()
	fmt.Fprintln(out, "ready")
	load := startStallLoad(ctx, inter, batch, newStormEnv(pool), []*fcsp.Tenant{it, bt}, sc)
	time.Sleep(cfg.warmup)
	t0 := time.Now()
	time.Sleep(sc.before)
	launch := launchForever(ctx, stuck, spin, &res)
	res.Stall, res.OtherStalls = awaitStall(seen, stuckName, launch.Add(sc.during))
	if res.Stall != nil {
		res.Stall.see(pool, stuck)
		res.Next = nextCalls(ctx, stuck, spin)
	}
	time.Sleep(time.Until(launch.Add(sc.during)))
	t2 := time.Now()
	hung := load.stop(10 * time.Second)
	res.Windows = []StallWindow{load.window(t0, launch), load.window(launch, t2)}
	res.Errors, res.FirstError, res.Hung, res.StormPerS = load.failed(hung)
	res.OtherStalls = append(res.OtherStalls, drainStalls(seen)...)
	// Drained, as a server drains before it replaces itself: the classes'
	// work and handles closed (not where a call hung: it would wait), for
	// at most the Shutdown bound. After a stall a drain can wait for good:
	// a library's handle freeing its memory (cublasDestroy's cudaFree)
	// waits for the whole device, the stuck kernel included. A server
	// that sees Health().RestartRequired bounds its drain the same way.
	if len(hung) == 0 {
		start := time.Now()
		drained := make(chan error, 1)
		go func() { drained <- errors.Join(inter.close(ctx), batch.close(ctx)) }()
		select {
		case err := <-drained:
			if err != nil {
				res.Errors++
				res.FirstError = cmp.Or(res.FirstError, "closing the classes: "+err.Error())
			}
		case <-time.After(sc.shutdown):
			res.DrainLeft = stackOf("main.(*class).close")
		}
		res.DrainMs = ms(time.Since(start))
	}
	sctx, cancel := context.WithTimeout(ctx, sc.shutdown)
	start := time.Now()
	err = pool.Shutdown(sctx)
	end := time.Now()
	cancel()
	// The tenants are the server's until here: a handle the collector
	// finds unreachable is closed by the SDK, and a stalled tenant's close
	// takes it out of the pool's list, so Shutdown would no longer name it.
	runtime.KeepAlive(it)
	runtime.KeepAlive(stuck)
	runtime.KeepAlive(bt)
	res.ShutdownStartNs, res.ShutdownEndNs = start.UnixNano(), end.UnixNano()
	if err != nil {
		res.ShutdownErr = err.Error()
		res.ShutdownStalled = errors.Is(err, fcsp.ErrStalled)
		res.ShutdownNamed = strings.Contains(err.Error(), strconv.Quote(stuckName))
	}
	if err := printResult(out, res); err != nil {
		return err
	}
	// The process exits now, the stuck kernel with it (the pool's close,
	// left running by Shutdown, with it too).
	fmt.Fprintf(out, "exiting %d\n", time.Now().UnixNano())
	return nil
}

func printResult(out io.Writer, res stallResult) error {
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "result %s\n", b)
	return nil
}

// spinFunction is the spin kernel, loaded in t.
func spinFunction(t *fcsp.Tenant) (*fcsp.Function, error) {
	mod, err := t.LoadModule(kernels.ChainPTX)
	if err != nil {
		return nil, err
	}
	return mod.Function("spin")
}

// launchForever launches spin(SpinForever) on t's stream, four blocks of
// 256 threads per SM of t's (its whole partition held), and times the
// launch; it returns when the launch began.
func launchForever(ctx context.Context, t *fcsp.Tenant, fn *fcsp.Function, res *stallResult) time.Time {
	var a fcsp.Args
	a.Uint64(kernels.SpinForever)
	grid := fcsp.Dim3{X: uint32(4 * max(t.SMs(), 1)), Y: 1, Z: 1}
	start := time.Now()
	err := t.Stream().Launch(ctx, fn, grid, fcsp.Dim3{X: 256, Y: 1, Z: 1}, 0, &a)
	res.LaunchUs = float64(time.Since(start).Nanoseconds()) / 1e3
	res.LaunchNs = start.UnixNano()
	if err != nil {
		res.LaunchErr = err.Error()
	}
	return start
}

// awaitStall waits until deadline for the stall of tenant; the stalls of
// others on the way are returned as such.
func awaitStall(seen <-chan stallEvent, tenant string, deadline time.Time) (*StallSeen, []string) {
	var others []string
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		select {
		case ev := <-seen:
			if ev.r.Tenant != tenant {
				others = append(others, stallText(ev.r))
				continue
			}
			r := ev.r
			return &StallSeen{Tenant: r.Tenant, Stream: fmt.Sprintf("%#x", r.Stream), Class: r.Class, Kernel: r.Kernel, Queued: r.Queued,
				SinceNs: r.Since.UnixNano(), FoundNs: r.Found.UnixNano(), HandledNs: ev.at.UnixNano(), BoundMs: ms(r.Bound)}, others
		case <-t.C:
			return nil, others
		}
	}
}

// see records what Health and Stats say of the stall.
func (s *StallSeen) see(pool *fcsp.Pool, t *fcsp.Tenant) {
	h := pool.Health()
	s.HealthNames = slices.ContainsFunc(h.Stalled, func(r fcsp.StallReport) bool { return r.Tenant == s.Tenant })
	s.RestartRequired, s.Healthy, s.StatsStalled = h.RestartRequired, h.Healthy(), t.Stats().Stalled != nil
}

func stallText(r fcsp.StallReport) string {
	return fmt.Sprintf("tenant %q stream %#x (%s) kernel %q, %d queued, for %v", r.Tenant, r.Stream, r.Class, r.Kernel, r.Queued, r.Found.Sub(r.Since).Round(time.Millisecond))
}

// drainStalls is the reports not taken yet.
func drainStalls(seen <-chan stallEvent) []string {
	var out []string
	for {
		select {
		case ev := <-seen:
			out = append(out, stallText(ev.r))
		default:
			return out
		}
	}
}

// nextCalls makes the stalled tenant's next calls, each timed: a launch
// (of a spin that would end at once), a Do, an allocation and a bounded
// synchronisation of the stuck stream.
func nextCalls(ctx context.Context, t *fcsp.Tenant, fn *fcsp.Function) []NextCall {
	var zero fcsp.Args
	zero.Uint64(0)
	one := fcsp.Dim3{X: 1, Y: 1, Z: 1}
	calls := []struct {
		name string
		f    func() error
	}{
		{"Stream.Launch", func() error { return t.Stream().Launch(ctx, fn, one, fcsp.Dim3{X: 32, Y: 1, Z: 1}, 0, &zero) }},
		{"Do", func() error { return t.Do(ctx, func(fcsp.Current) error { return nil }) }},
		{"Alloc", func() error {
			p, err := t.Alloc(ctx, 4096)
			if err == nil {
				err = t.Free(p)
			}
			return err
		}},
		{"Stream.SynchronizeContext", func() error {
			c, cancel := context.WithTimeout(ctx, 100*time.Millisecond) // not refused: it would wait for good
			defer cancel()
			return t.Stream().SynchronizeContext(c)
		}},
	}
	var out []NextCall
	for _, c := range calls {
		start := time.Now()
		err := c.f()
		n := NextCall{Call: c.name, Us: float64(time.Since(start).Nanoseconds()) / 1e3, Stalled: errors.Is(err, fcsp.ErrStalled)}
		if err != nil {
			n.Err = err.Error()
		}
		out = append(out, n)
	}
	return out
}

// stallSpinner is the mps variant's spinning client: on "spin" it
// launches the kernel that never ends, says so, reports its stall (its
// own watchdog's) and next calls, then waits to be killed.
func stallSpinner(ctx context.Context, cfg config, out, errw io.Writer) error {
	sc := cfg.stall
	pool, _, seen, err := openStall(ctx, cfg, errw, false, sc.bound)
	if err != nil {
		return err
	}
	t, err := pool.NewTenant("mps-spin")
	if err != nil {
		return err
	}
	fn, err := spinFunction(t)
	if err != nil {
		return err
	}
	res := stallResult{Role: "spin", Simulated: pool.Device().Simulated, Device: pool.Device().String()}
	fmt.Fprintln(out, "ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() && strings.TrimSpace(in.Text()) != "spin" {
	}
	launch := launchForever(ctx, t, fn, &res)
	fmt.Fprintf(out, "launched %d\n", launch.UnixNano())
	res.Stall, res.OtherStalls = awaitStall(seen, t.Name(), launch.Add(sc.during))
	if res.Stall != nil {
		res.Stall.see(pool, t)
		res.Next = nextCalls(ctx, t, fn)
	}
	if err := printResult(out, res); err != nil {
		return err
	}
	for in.Scan() { // SIGKILLed here, mid-kernel
	}
	runtime.KeepAlive(t) // not closed by the collector meanwhile: held as a server would
	return nil
}

// stallClassRole is one measured class of the mps variant: it serves
// from "ready" until its windows come on stdin, then reports them.
func stallClassRole(ctx context.Context, cfg config, out, errw io.Writer) error {
	sc := cfg.stall
	pool, wk, seen, err := openStall(ctx, cfg, errw, true, cmp.Or(sc.classBound, sc.bound))
	if err != nil {
		return err
	}
	role := sc.role
	t, err := pool.NewTenant("mps-" + role)
	if err != nil {
		return err
	}
	n := sc.k
	if role == "batch" {
		n = max(cfg.batchK, 2)
	}
	cl, err := newClass(ctx, role, t, role == "batch", n, wk)
	if err != nil {
		return err
	}
	var inter, batch *class
	if role == "batch" {
		batch = cl
	} else {
		inter = cl
	}
	fmt.Fprintln(out, "ready")
	load := startStallLoad(ctx, inter, batch, newStormEnv(pool), []*fcsp.Tenant{t}, sc)
	var bounds []int64
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if rest, ok := strings.CutPrefix(in.Text(), "windows "); ok {
			for _, f := range strings.Fields(rest) {
				v, err := strconv.ParseInt(f, 10, 64)
				if err != nil {
					return fmt.Errorf("windows %q: %w", rest, err)
				}
				bounds = append(bounds, v)
			}
		}
	}
	if len(bounds) == 0 || len(bounds)%2 != 0 {
		return fmt.Errorf("no windows given (%v)", bounds)
	}
	hung := load.stop(10 * time.Second)
	res := stallResult{Role: role, Work: wk.String(), Simulated: pool.Device().Simulated, Device: pool.Device().String()}
	for i := 0; i < len(bounds); i += 2 {
		res.Windows = append(res.Windows, load.window(time.Unix(0, bounds[i]), time.Unix(0, bounds[i+1])))
	}
	res.Errors, res.FirstError, res.Hung, res.StormPerS = load.failed(hung)
	res.OtherStalls = drainStalls(seen)
	if err := printResult(out, res); err != nil {
		return err
	}
	if len(hung) > 0 {
		return nil // a call that never returned: closing would wait for it
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return errors.Join(cl.close(ctx), t.Close(), pool.Shutdown(sctx))
}

// stallReplacement is the process that replaces the one whose kernel
// never ended: it says when it ran, opened its pool, made its tenant and
// served its first interactive request (checked), then exits.
func stallReplacement(ctx context.Context, cfg config, out, errw io.Writer) error {
	fmt.Fprintf(out, "running %d\n", processStart.UnixNano())
	pool, wk, _, err := openStall(ctx, cfg, errw, true, cmp.Or(cfg.stall.classBound, cfg.stall.bound))
	if err != nil {
		return err
	}
	defer pool.Close()
	fmt.Fprintf(out, "open %d\n", time.Now().UnixNano())
	var opts []fcsp.TenantOption
	if cfg.stall.variants[0] == "sdk" {
		opts = append(opts, fcsp.WithSMs(cfg.interSMs))
	}
	t, err := pool.NewTenant("interactive", opts...)
	if err != nil {
		return err
	}
	defer t.Close()
	cl, err := makeClass(ctx, "interactive", t, false, 1, wk, false)
	if err != nil {
		return err
	}
	defer cl.close(ctx)
	fmt.Fprintf(out, "ready %d\n", time.Now().UnixNano())
	w := cl.workers[0]
	if err := errors.Join(w.Run(ctx), w.Stream().Synchronize(), w.Check()); err != nil {
		return fmt.Errorf("the first request: %w", err)
	}
	fmt.Fprintf(out, "first %d\n", time.Now().UnixNano())
	return nil
}

// stallLoad is the classes' load through a stall run: the interactive
// request goroutines (one request at a time each), the batch goroutines
// (two GEMMs in flight each), the storm's racing calls, every request
// stamped on the wall clock, which every process of the host shares.
type stallLoad struct {
	stop_      chan struct{}
	wg         sync.WaitGroup
	inter      []*lane
	batch      []*lane
	batchFlops float64
	storm      *storm
	start      time.Time
	stormEnd   time.Time
}

// lane is one goroutine's record; its own lock, so that a window can be
// read while a call that never returns is still under way.
type lane struct {
	mu       sync.Mutex
	done     []stamp
	inflight int64 // the start of the call under way, UnixNano; 0: none
	errs     []stamp
	errText  string
}

// stamp is one request (n GEMMs) from start to end, UnixNano.
type stamp struct {
	start, end int64
	n          int
}

func (l *lane) begin(t time.Time) {
	l.mu.Lock()
	l.inflight = t.UnixNano()
	l.mu.Unlock()
}

func (l *lane) end(start time.Time, n int, err error) {
	s := stamp{start.UnixNano(), start.UnixNano() + time.Since(start).Nanoseconds(), n}
	l.mu.Lock()
	l.inflight = 0
	if err != nil {
		l.errs = append(l.errs, s)
		if l.errText == "" {
			l.errText = err.Error()
		}
	} else {
		l.done = append(l.done, s)
	}
	l.mu.Unlock()
}

func startStallLoad(ctx context.Context, inter, batch *class, env *stormEnv, tenants []*fcsp.Tenant, sc stallCfg) *stallLoad {
	l := &stallLoad{stop_: make(chan struct{}), start: time.Now()}
	stopped := func() bool {
		select {
		case <-l.stop_:
			return true
		default:
			return false
		}
	}
	// A goroutine whose call fails records it and goes on: under MPS a
	// killed neighbour's effect on the others is what is measured.
	run := func(ln *lane, n int, f func() error) {
		for !stopped() {
			t0 := time.Now()
			ln.begin(t0)
			err := f()
			ln.end(t0, n, err)
			if err != nil {
				time.Sleep(time.Millisecond) // no spinning on an error
			}
		}
	}
	if inter != nil {
		for _, w := range inter.workers {
			ln := &lane{done: make([]stamp, 0, 1<<16)}
			l.inter = append(l.inter, ln)
			l.wg.Go(func() { run(ln, 1, func() error { return errors.Join(w.Run(ctx), w.Stream().Synchronize()) }) })
		}
	}
	if batch != nil {
		l.batchFlops = batch.flops
		for _, w := range batch.workers {
			ln := &lane{done: make([]stamp, 0, 1<<14)}
			l.batch = append(l.batch, ln)
			l.wg.Go(func() {
				run(ln, 2, func() error { return errors.Join(w.Run(ctx), w.Run(ctx), w.Stream().Synchronize()) })
			})
		}
	}
	kinds, _ := sc.stormKinds() // checked by parse
	l.storm = startStorm(ctx, env, tenants, kinds, sc.stormG, sc.pace, l.stop_)
	return l
}

// stop ends the load and waits up to d for its goroutines; it names those
// still in a call (a call that never returns).
func (l *stallLoad) stop(d time.Duration) (hung []string) {
	close(l.stop_)
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		_ = l.storm.wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		for i, ln := range append(slices.Clone(l.inter), l.batch...) {
			ln.mu.Lock()
			if ln.inflight != 0 {
				hung = append(hung, fmt.Sprintf("goroutine %d: a call under way for %v", i, time.Since(time.Unix(0, ln.inflight)).Round(time.Millisecond)))
			}
			ln.mu.Unlock()
		}
		if len(hung) == 0 {
			hung = append(hung, "the storm's calls")
		}
	}
	l.stormEnd = time.Now()
	return hung
}

// failed is the calls that failed (the storm's among them), the first
// error, what hung, and the storm's calls a second.
func (l *stallLoad) failed(hung []string) (n int, first string, _ []string, stormPerS float64) {
	for _, ln := range append(slices.Clone(l.inter), l.batch...) {
		ln.mu.Lock()
		n += len(ln.errs)
		first = cmp.Or(first, ln.errText)
		ln.mu.Unlock()
	}
	if len(hung) == 0 { // the storm's goroutines have ended: its error is final
		if err := l.storm.wait(); err != nil {
			n++
			first = cmp.Or(first, err.Error())
		}
	}
	var calls int64
	for _, v := range l.storm.snapshot() {
		calls += v
	}
	return n, first, hung, float64(calls) / l.stormEnd.Sub(l.start).Seconds()
}

// window is the figures of [from, to).
func (l *stallLoad) window(from, to time.Time) StallWindow {
	f, t := from.UnixNano(), to.UnixNano()
	w := StallWindow{FromNs: f, ToNs: t}
	in := func(x int64) bool { return x >= f && x < t }
	now := time.Now().UnixNano()
	var us []float64
	for _, ln := range l.inter {
		ln.mu.Lock()
		for _, s := range ln.done {
			if in(s.start) {
				us = append(us, float64(s.end-s.start)/1e3)
			}
		}
		if in(ln.inflight) {
			us = append(us, float64(now-ln.inflight)/1e3)
			w.Unfinished++
		}
		w.countErrs(ln, in)
		ln.mu.Unlock()
	}
	slices.Sort(us)
	sec := to.Sub(from).Seconds()
	w.Requests = len(us)
	w.P50us, w.P99us, w.MaxUs = pct(us, 0.5), pct(us, 0.99), pct(us, 1)
	if sec > 0 {
		w.ReqPerS = float64(len(us)) / sec
	}
	for _, ln := range l.batch {
		ln.mu.Lock()
		for _, s := range ln.done {
			if in(s.end) {
				w.BatchGEMMs += int64(s.n)
			}
		}
		w.countErrs(ln, in)
		ln.mu.Unlock()
	}
	if sec > 0 {
		w.BatchTFLOPs = float64(w.BatchGEMMs) * l.batchFlops / sec / 1e12
	}
	return w
}

func (w *StallWindow) countErrs(ln *lane, in func(int64) bool) {
	for _, s := range ln.errs {
		if in(s.end) {
			w.Errors++
			w.FirstError = cmp.Or(w.FirstError, ln.errText)
		}
	}
}

// stallProc is one process of the stall mode as this one sees it: its
// output lines, its stderr (readable while it runs), and its exit, waited
// for from the start so that the moment is known.
type stallProc struct {
	role   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr lockedBuffer
	exited chan struct{}
	exitAt time.Time // set before exited closes
	err    error     // Wait's
	killed atomic.Bool
}

func startProc(ctx context.Context, exe, role string, args []string, env ...string) (*stallProc, error) {
	p := &stallProc{role: role, lines: make(chan string, 256), exited: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, exe, args...)
	p.cmd.Env = append(append(os.Environ(), selfEnv, "GOTRACEBACK=all"), env...) // all: quit's dump names every goroutine
	p.cmd.Stdout = &lineWriter{ch: p.lines}
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s process: %w", role, err)
	}
	go func() {
		err := p.cmd.Wait() // returns once its output is copied: every line is in p.lines
		p.exitAt, p.err = time.Now(), err
		close(p.exited)
	}()
	return p, nil
}

// expect reads lines until one starts with prefix and returns the rest;
// the process's exit or d passing first is an error.
func (p *stallProc) expect(prefix string, d time.Duration) (string, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	match := func(l string) (string, bool) { return strings.CutPrefix(l, prefix) }
	for {
		select {
		case l := <-p.lines:
			if rest, ok := match(l); ok {
				return rest, nil
			}
		case <-p.exited:
			for {
				select {
				case l := <-p.lines:
					if rest, ok := match(l); ok {
						return rest, nil
					}
				default:
					return "", fmt.Errorf("%s process exited (%v) before saying %q: %s", p.role, p.err, strings.TrimSpace(prefix), tail(p.stderr.String(), 6))
				}
			}
		case <-t.C:
			return "", fmt.Errorf("%s process: no %q in %v: %s", p.role, strings.TrimSpace(prefix), d, tail(p.stderr.String(), 6))
		}
	}
}

// quit sends SIGQUIT, which makes a Go process print every goroutine's
// stack to its stderr and exit: where a process that stopped answering
// waits (a driver call names itself in the cgo frame). It waits up to d
// for the exit and returns the process's stderr.
func (p *stallProc) quit(d time.Duration) string {
	p.killed.Store(true) // the exit is ours: dump does not print it again
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	if !p.waitExit(d) {
		p.kill()
		p.waitExit(d)
	}
	return p.stderr.String()
}

// kill sends SIGKILL and says when.
func (p *stallProc) kill() time.Time {
	t := time.Now()
	p.killed.Store(true)
	_ = p.cmd.Process.Kill()
	return t
}

// dump copies the stderr of a process that exited with an error of its
// own (not a SIGKILL of ours) to w: why it failed.
func (p *stallProc) dump(w io.Writer) {
	select {
	case <-p.exited:
	default:
		return
	}
	if p.err != nil && !p.killed.Load() {
		fmt.Fprintf(w, "== the %s process exited: %v; its stderr:\n%s\n== end of the %s process's stderr\n", p.role, p.err, p.stderr.String(), p.role)
	}
}

// waitExit waits up to d for the exit.
func (p *stallProc) waitExit(d time.Duration) bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(d):
		return false
	}
}

// stop ends a process still running (its input closed, then SIGKILL).
func (p *stallProc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.stdin.Close()
	p.kill()
	p.waitExit(10 * time.Second)
}

// lineWriter sends each line written to it to ch (a process's stdout,
// copied by exec's goroutine; lines beyond ch's room are dropped).
type lineWriter struct {
	ch  chan string
	buf []byte
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		select {
		case w.ch <- string(w.buf[:i]):
		default:
		}
		w.buf = w.buf[i+1:]
	}
}

// lockedBuffer is a process's stderr, readable while it runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
