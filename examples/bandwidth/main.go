// Command bandwidth measures what green contexts do not isolate: memory
// bandwidth. A latency tenant of 16 SMs serves requests, each one STREAM
// triad (a = b + s*c) over arrays of -lat-mib MiB, arriving every
// -interval; a neighbour on the other SMs runs back to back. For each mode
// it prints the requests' P50 and P99 latency and achieved bandwidth beside
// the latency tenant alone, and the neighbour's throughput beside the
// neighbour alone (what the priority costs it):
//
//   - alone: no neighbour;
//   - memory: a triad neighbour, unlimited;
//   - memory+floor F: the same neighbour with WithBandwidthFloor(F), the
//     latency tenant WithPriority(fcsp.LatencyCritical): while a request is
//     on the GPU the neighbour is admitted at F of the device's time;
//   - compute: a neighbour running dependent FMA chains (no memory traffic).
//
// The latency tenant is LatencyCritical and metered in every mode (the
// same overheads everywhere); only the neighbour's floor differs. Its
// Stats.Bandwidth figures (GPU-clock bandwidth, slowdown against its best)
// are printed beside the wall-clock ones.
//
//	go run ./examples/bandwidth          # GPU if present, else the simulator (which says the numbers need a GPU)
//	go run ./examples/bandwidth -json
//	go run ./examples/bandwidth -json-out bw.json   # the table, and the JSON in a file
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// Config is what the flags set.
type Config struct {
	LatSMs      int           `json:"lat_sms"`
	LatMiB      int           `json:"lat_mib"`      // per array of a latency request, as asked (the simulator uses 4096 floats: Result's *_array_bytes say what ran)
	NbMiB       int           `json:"nb_mib"`       // per array of a neighbour triad, as asked
	ChainSteps  int           `json:"chain_steps"`  // the compute neighbour's FMAs per thread
	Requests    int           `json:"requests"`     // per mode
	Interval    time.Duration `json:"interval_ns"`  // between request arrivals
	Floors      []float64     `json:"floors"`       // one memory+floor mode each
	Refill      time.Duration `json:"refill_ns"`    // the floored neighbour's refill period
	NbBaseline  time.Duration `json:"nb_baseline"`  // how long each neighbour runs alone
	Simulate    bool          `json:"simulate"`     // the simulated H200
	MaxDuration time.Duration `json:"max_duration"` // a mode stops early past this

	latN, nbN int // float32 elements per array, as run
}

// Mode is one row of the table.
type Mode struct {
	Name      string  `json:"name"`
	Neighbour string  `json:"neighbour"` // none, memory, compute
	Floor     float64 `json:"floor,omitempty"`
	Requests  int     `json:"requests"`

	P50Us      float64 `json:"p50_us"` // request latency, wall clock: launch to Synchronize
	P99Us      float64 `json:"p99_us"`
	P50VsAlone float64 `json:"p50_vs_alone"` // this / alone (1: as fast as alone)
	P99VsAlone float64 `json:"p99_vs_alone"`
	GBps       float64 `json:"gbps"`          // request bytes / P50 latency
	GBpsVsAl   float64 `json:"gbps_vs_alone"` // this / alone (1: as fast as alone)
	GPUGBps    float64 `json:"gpu_gbps"`      // Stats.Bandwidth.BytesPerSecond (GPU clock, recent)
	Slowdown   float64 `json:"slowdown"`      // Stats.Bandwidth.Slowdown

	NbPerS     float64 `json:"nb_kernels_per_s,omitempty"` // neighbour kernels queued per second
	NbGBps     float64 `json:"nb_gbps,omitempty"`          // memory neighbour: bytes x kernels/s
	NbVsAlone  float64 `json:"nb_vs_alone,omitempty"`      // this / the neighbour alone
	NbFloored  uint64  `json:"nb_floored_launches,omitempty"`
	NbBaseline float64 `json:"nb_alone_kernels_per_s,omitempty"`
}

// Result is the program's output.
type Result struct {
	Device    string  `json:"device"`
	Simulated bool    `json:"simulated"`
	Config    Config  `json:"config"`
	NbSMs     int     `json:"neighbour_sms"`
	LatBytes  uint64  `json:"lat_array_bytes"` // per array of a latency request, as run
	NbBytes   uint64  `json:"nb_array_bytes"`  // per array of a neighbour triad, as run
	Modes     []Mode  `json:"modes"`
	WallS     float64 `json:"wall_s"`
}

func main() {
	var cfg Config
	var floors string
	flag.IntVar(&cfg.LatSMs, "lat-sms", 16, "SMs of the latency tenant")
	flag.IntVar(&cfg.LatMiB, "lat-mib", 128, "MiB per array of a latency request (the triad moves 3x that)")
	flag.IntVar(&cfg.NbMiB, "nb-mib", 64, "MiB per array of a neighbour triad")
	flag.IntVar(&cfg.ChainSteps, "chain-steps", 16384, "dependent FMAs per thread of a compute-neighbour kernel")
	flag.IntVar(&cfg.Requests, "requests", 400, "latency requests per mode")
	flag.DurationVar(&cfg.Interval, "interval", 2*time.Millisecond, "time between request arrivals")
	flag.StringVar(&floors, "floors", "0.25,0.1", "comma-separated floors, one memory+floor mode each")
	flag.DurationVar(&cfg.Refill, "refill", 200*time.Microsecond, "refill period of the floored neighbour (its burst)")
	flag.DurationVar(&cfg.NbBaseline, "nb-alone", 500*time.Millisecond, "how long each neighbour runs alone for its baseline")
	flag.DurationVar(&cfg.MaxDuration, "max-mode", 5*time.Second, "a mode stops sending requests after this long")
	flag.BoolVar(&cfg.Simulate, "simulate", false, "use the simulated H200")
	asJSON := flag.Bool("json", false, "print JSON instead of the table")
	jsonOut := flag.String("json-out", "", "also write the JSON to this file")
	flag.Parse()
	for _, f := range strings.Split(floors, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bandwidth: -floors: %v\n", err)
			os.Exit(2)
		}
		cfg.Floors = append(cfg.Floors, v)
	}
	r, err := run(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bandwidth: FAIL:", err)
		os.Exit(1)
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(r, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bandwidth:", err)
			os.Exit(1)
		}
	}
	if *asJSON {
		_ = json.NewEncoder(os.Stdout).Encode(r)
		return
	}
	printTable(os.Stdout, r)
}

func open(ctx context.Context, simulate bool) (*fcsp.Pool, error) {
	if !simulate {
		p, err := fcsp.Open(ctx, 0)
		if !errors.Is(err, fcsp.ErrNoDriver) {
			return p, err
		}
		fmt.Fprintf(os.Stderr, "no GPU here (%v): running on the simulated H200, where kernels take no time\n", err)
	}
	return fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
}

func run(ctx context.Context, cfg Config) (*Result, error) {
	start := time.Now()
	pool, err := open(ctx, cfg.Simulate)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	info := pool.Device()
	r := &Result{Device: info.String(), Simulated: info.Simulated, Config: cfg}
	if info.Simulated {
		// The simulator computes the triad in Go: keep the arrays small.
		cfg.latN, cfg.nbN, cfg.ChainSteps = simElems, simElems, 16
		cfg.Requests = min(cfg.Requests, 50)
		cfg.NbBaseline = min(cfg.NbBaseline, 50*time.Millisecond)
		r.Config = cfg
	}
	if !info.Simulated {
		cfg.latN, cfg.nbN = max(cfg.LatMiB<<20/4, simElems), max(cfg.NbMiB<<20/4, simElems)
	}
	r.LatBytes, r.NbBytes = 4*uint64(cfg.latN), 4*uint64(cfg.nbN)
	lat, err := newLatency(ctx, pool, cfg)
	if err != nil {
		return nil, err
	}
	defer lat.close()

	alone, err := lat.serve(ctx, cfg)
	if err != nil {
		return nil, err
	}
	alone.Name, alone.Neighbour = "alone", "none"
	r.Modes = append(r.Modes, alone)

	type spec struct {
		name, kind string
		floor      float64
	}
	specs := []spec{{"memory", "memory", 0}}
	for _, f := range cfg.Floors {
		specs = append(specs, spec{fmt.Sprintf("memory+floor %.2g", f), "memory", f})
	}
	specs = append(specs, spec{"compute", "compute", 0})
	baseline := map[string]float64{}
	for _, sp := range specs {
		nb, err := newNeighbour(ctx, pool, cfg, sp.kind, sp.floor)
		if err != nil {
			return nil, fmt.Errorf("%s neighbour: %w", sp.name, err)
		}
		r.NbSMs = nb.t.SMs()
		if _, ok := baseline[sp.kind]; !ok { // the neighbour alone, once per kind
			n, el, err := nb.runFor(ctx, cfg.NbBaseline, nil)
			if err != nil {
				nb.close()
				return nil, err
			}
			baseline[sp.kind] = float64(n) / el.Seconds()
		}
		var m Mode
		n, el, err := nb.runFor(ctx, 0, func() error {
			var err error
			m, err = lat.serve(ctx, cfg)
			return err
		})
		m.NbFloored = nb.t.Stats().Bandwidth.FlooredLaunches
		nb.close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sp.name, err)
		}
		m.Name, m.Neighbour, m.Floor = sp.name, sp.kind, sp.floor
		m.NbPerS = float64(n) / el.Seconds()
		m.NbBaseline = baseline[sp.kind]
		m.NbVsAlone = m.NbPerS / m.NbBaseline
		if sp.kind == "memory" {
			m.NbGBps = m.NbPerS * float64(kernels.TriadBytes(nb.n)) / 1e9
		}
		r.Modes = append(r.Modes, m)
	}
	for i := range r.Modes {
		m := &r.Modes[i]
		m.P50VsAlone, m.P99VsAlone, m.GBpsVsAl = m.P50Us/alone.P50Us, m.P99Us/alone.P99Us, m.GBps/alone.GBps
	}
	r.WallS = time.Since(start).Seconds()
	return r, nil
}

// simElems is the simulator's array length, in float32 elements.
const simElems = 4096

// size is n bytes in the largest binary unit that keeps a whole number.
func size(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// triad is a tenant's three arrays and its loaded triad kernel.
type triad struct {
	t       *fcsp.Tenant
	fn      *fcsp.Function
	n       int
	a, b, c fcsp.DevicePtr
	args    fcsp.Args
	grid    fcsp.Dim3
}

func newTriad(ctx context.Context, t *fcsp.Tenant, n int) (*triad, error) {
	mod, err := t.LoadModule(kernels.TriadPTX)
	if err != nil {
		return nil, err
	}
	tr := &triad{t: t, n: n, grid: fcsp.Dim3{X: uint32(8 * t.SMs()), Y: 1, Z: 1}}
	if tr.fn, err = mod.Function("triad"); err != nil {
		return nil, err
	}
	tr.fn.SetBytesMoved(kernels.TriadBytes(n))
	for _, p := range []*fcsp.DevicePtr{&tr.a, &tr.b, &tr.c} {
		if *p, err = t.Alloc(ctx, 4*uint64(n)); err != nil {
			return nil, err
		}
	}
	s := t.Stream()
	if err := errors.Join(s.MemsetD32(tr.b, math.Float32bits(1.5), uint64(n)), s.MemsetD32(tr.c, math.Float32bits(2), uint64(n)), s.Synchronize()); err != nil {
		return nil, err
	}
	tr.args.Ptr(tr.a).Ptr(tr.b).Ptr(tr.c).Float32(3).Uint32(uint32(n))
	return tr, nil
}

func (tr *triad) launch(ctx context.Context, s *fcsp.Stream) error {
	return s.Launch(ctx, tr.fn, tr.grid, fcsp.Dim3{X: 256, Y: 1, Z: 1}, 0, &tr.args)
}

// check compares the first elements of a with b + s*c.
func (tr *triad) check() error {
	k := 4 * min(tr.n, 1<<18)
	a, b, c := make([]byte, k), make([]byte, k), make([]byte, k)
	if err := errors.Join(tr.t.CopyFromDevice(a, tr.a), tr.t.CopyFromDevice(b, tr.b), tr.t.CopyFromDevice(c, tr.c)); err != nil {
		return err
	}
	return kernels.CheckTriad(a, b, c, 3)
}

// latency is the latency tenant.
type latency struct {
	t  *fcsp.Tenant
	tr *triad
}

func newLatency(ctx context.Context, pool *fcsp.Pool, cfg Config) (*latency, error) {
	t, err := pool.NewTenant("latency", fcsp.WithSMs(cfg.LatSMs), fcsp.WithPriority(fcsp.LatencyCritical))
	if err != nil {
		return nil, err
	}
	tr, err := newTriad(ctx, t, cfg.latN)
	if err != nil {
		t.Close()
		return nil, err
	}
	l := &latency{t: t, tr: tr}
	// Warm up (module JIT, first-launch costs), and check the results.
	for range 3 {
		if err := errors.Join(tr.launch(ctx, t.Stream()), t.Stream().Synchronize()); err != nil && !errors.Is(err, fcsp.ErrNotComputed) {
			t.Close()
			return nil, err
		}
	}
	if err := tr.check(); err != nil {
		t.Close()
		return nil, err
	}
	return l, nil
}

func (l *latency) close() { _ = l.t.Close() }

// serve sends cfg.Requests requests, one every cfg.Interval (at once when
// behind), and measures each from its launch to its Synchronize.
func (l *latency) serve(ctx context.Context, cfg Config) (Mode, error) {
	lats := make([]float64, 0, cfg.Requests)
	s := l.t.Stream()
	t0 := time.Now()
	for i := range cfg.Requests {
		if d := time.Until(t0.Add(time.Duration(i) * cfg.Interval)); d > 0 {
			time.Sleep(d)
		}
		if time.Since(t0) > cfg.MaxDuration {
			break
		}
		st := time.Now()
		if err := errors.Join(l.tr.launch(ctx, s), s.Synchronize()); err != nil && !errors.Is(err, fcsp.ErrNotComputed) {
			return Mode{}, err
		}
		lats = append(lats, float64(time.Since(st).Nanoseconds())/1e3)
	}
	slices.Sort(lats)
	bs := l.t.Stats().Bandwidth
	m := Mode{Requests: len(lats), P50Us: percentile(lats, 50), P99Us: percentile(lats, 99), GPUGBps: bs.BytesPerSecond / 1e9, Slowdown: bs.Slowdown}
	m.GBps = float64(kernels.TriadBytes(l.tr.n)) / (m.P50Us * 1e3)
	return m, nil
}

// percentile is the nearest-rank p-th percentile of sorted.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// neighbour runs kernels back to back on the other SMs, two in flight.
type neighbour struct {
	t      *fcsp.Tenant
	tr     *triad // memory
	chain  *fcsp.Function
	out    fcsp.DevicePtr
	cargs  fcsp.Args
	cgrid  fcsp.Dim3
	n      int
	events [2]*fcsp.Event
}

func newNeighbour(ctx context.Context, pool *fcsp.Pool, cfg Config, kind string, floor float64) (*neighbour, error) {
	opts := []fcsp.TenantOption{fcsp.WithRestOfSMs(), fcsp.WithGPUMetering()}
	if floor > 0 {
		opts = append(opts, fcsp.WithBandwidthFloor(floor), fcsp.WithTenantRefillPeriod(cfg.Refill))
	}
	t, err := pool.NewTenant("neighbour", opts...)
	if err != nil {
		return nil, err
	}
	nb := &neighbour{t: t}
	fail := func(err error) (*neighbour, error) { nb.close(); return nil, err }
	for i := range nb.events {
		if nb.events[i], err = t.NewEvent(); err != nil {
			return fail(err)
		}
	}
	if kind == "memory" {
		nb.n = cfg.nbN
		if nb.tr, err = newTriad(ctx, t, nb.n); err != nil {
			return fail(err)
		}
		return nb, nil
	}
	mod, err := t.LoadModule(kernels.ChainPTX)
	if err != nil {
		return fail(err)
	}
	if nb.chain, err = mod.Function("chain"); err != nil {
		return fail(err)
	}
	threads := t.SMs() * 2048
	if nb.out, err = t.Alloc(ctx, 4*uint64(threads)); err != nil {
		return fail(err)
	}
	nb.cargs.Ptr(nb.out).Int32(int32(threads)).Int32(int32(cfg.ChainSteps))
	nb.cgrid = fcsp.Dim3{X: uint32(threads / 256), Y: 1, Z: 1}
	return nb, nil
}

func (nb *neighbour) close() { _ = nb.t.Close() }

func (nb *neighbour) launch(ctx context.Context) error {
	s := nb.t.Stream()
	if nb.tr != nil {
		return nb.tr.launch(ctx, s)
	}
	return s.Launch(ctx, nb.chain, nb.cgrid, fcsp.Dim3{X: 256, Y: 1, Z: 1}, 0, &nb.cargs)
}

// runFor launches back to back, keeping two kernels in flight, for d, or
// (d == 0) while during runs; it returns the kernels launched and the time.
func (nb *neighbour) runFor(ctx context.Context, d time.Duration, during func() error) (int, time.Duration, error) {
	var stop atomic.Bool
	var n int
	var lerr error
	var wg sync.WaitGroup
	st := time.Now()
	started := make(chan struct{}) // the neighbour's first launch is queued
	var once sync.Once
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer once.Do(func() { close(started) })
		s := nb.t.Stream()
		for i := 0; !stop.Load(); i++ {
			e := nb.events[i%2]
			if i >= 2 {
				if err := e.Synchronize(); err != nil { // the launch two back
					lerr = err
					return
				}
			}
			if err := nb.launch(ctx); err != nil && !errors.Is(err, fcsp.ErrNotComputed) {
				lerr = err
				return
			}
			if err := e.Record(s); err != nil {
				lerr = err
				return
			}
			n++
			once.Do(func() { close(started) })
		}
		lerr = s.Synchronize()
	}()
	// What is measured beside the neighbour starts once it runs: a busy
	// host may start this goroutine only after a short during has ended.
	<-started
	var err error
	if during != nil {
		err = during()
	} else {
		time.Sleep(d)
	}
	stop.Store(true)
	el := time.Since(st)
	wg.Wait()
	return n, el, errors.Join(err, lerr)
}

func printTable(w io.Writer, r *Result) {
	fmt.Fprintln(w, r.Device)
	c := r.Config
	fmt.Fprintf(w, "latency tenant: %d SMs, LatencyCritical, one triad over %s arrays per request (%s moved), a request every %v\n",
		c.LatSMs, size(r.LatBytes), size(3*r.LatBytes), c.Interval)
	fmt.Fprintf(w, "neighbour: the other %d SMs, two kernels in flight; memory: triad over %s arrays; compute: chain of %d FMAs per thread; floored refill period %v\n",
		r.NbSMs, size(r.NbBytes), c.ChainSteps, c.Refill)
	if r.Simulated {
		fmt.Fprintf(w, "(simulated: arrays of %d floats and chains of 16 FMAs, whatever -lat-mib, -nb-mib and -chain-steps say: the simulator computes them in Go)\n", simElems)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-18s %9s %9s %7s %7s %8s %7s %8s %8s | %11s %8s %8s\n",
		"mode", "P50 us", "P99 us", "P50/al", "P99/al", "GB/s", "/alone", "GPU GB/s", "slowdown", "nb kern/s", "nb GB/s", "nb/alone")
	for _, m := range r.Modes {
		nb := fmt.Sprintf("%11s %8s %8s", "-", "-", "-")
		if m.Neighbour != "none" {
			nb = fmt.Sprintf("%11.0f %8.0f %8.3f", m.NbPerS, m.NbGBps, m.NbVsAlone)
		}
		fmt.Fprintf(w, "%-18s %9.1f %9.1f %7.3f %7.3f %8.1f %7.3f %8.1f %8.3f | %s\n",
			m.Name, m.P50Us, m.P99Us, m.P50VsAlone, m.P99VsAlone, m.GBps, m.GBpsVsAl, m.GPUGBps, m.Slowdown, nb)
	}
	fmt.Fprintln(w, "\nP50/al, P99/al: latency over the alone figure (1 = as fast as alone); GB/s: request bytes / P50 wall latency, /alone its fraction of alone;")
	fmt.Fprintln(w, "GPU GB/s and slowdown: the latency tenant's Stats.Bandwidth (GPU clock, last ~100 ms of its GPU time; slowdown against the best it has run);")
	fmt.Fprintln(w, "nb/alone: the neighbour's kernels/s over its own alone figure (what the priority costs it).")
	fmt.Fprintf(w, "wall time %.1f s\n", r.WallS)
	if r.Simulated {
		fmt.Fprintln(w, "(simulated: kernels take no time on the simulator, so these numbers mean nothing; they need a GPU)")
	}
}
