// Command memlimit shows what the device sees of a server's memory under
// fcsp.WithDeviceMemoryLimit (issue 54): a latency class of 16-48 SMs
// (WithLatencyTarget, WithWarmup), a rest class beside it, and request
// goroutines, each with a stream and a cuBLAS handle of its own, its
// workspace from the class's quota. Through the run it samples the
// process's device memory as NVML reports it (PoolStats.DeviceMemory)
// beside what the pool counts: the tenants' memory (MemoryUsed), the SDK's
// own objects' (Overhead: green contexts, streams, modules) and the rest
// (Unaccounted: the primary context, what cuBLAS keeps for itself). It
// prints a row per sample and says whether the process passed the limit
// where the SDK made the memory, and where it did not.
//
// Without a GPU (or with -sim) it runs on the simulated H200, whose fake
// driver stands for NVML; without cuBLAS each request is a Do that takes
// scratch memory from the quota instead of a GEMM. The memory figures are
// then the fake's models; on a GPU they are measured.
//
//	memlimit [-limit 4096] [-duration 10s] [-sample 100ms] [-requests 16] [-headroom] [-no-workspace] [-sim] [-cublas path]
//	memlimit -handle [-handles 4] [-cublas path]   # what one cuBLAS handle takes, with and without a workspace from the quota
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fcsp-go/fcsp-go/examples/internal/gemmjob"
	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
)

func main() {
	c, err := parse(os.Args[1:])
	if err == nil {
		err = run(context.Background(), c, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "memlimit:", err)
		os.Exit(1)
	}
}

type config struct {
	limitMiB    uint64
	duration    time.Duration
	sample      time.Duration
	requests    int
	headroom    bool
	noWorkspace bool
	sim         bool
	cublas      string
	handle      bool
	handles     int
}

func parse(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("memlimit", flag.ContinueOnError)
	fs.Uint64Var(&c.limitMiB, "limit", 4096, "WithDeviceMemoryLimit, in MiB")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long the requests run")
	fs.DurationVar(&c.sample, "sample", 100*time.Millisecond, "how often the pool samples NVML (WithMemorySampling) and the table gets a row")
	fs.IntVar(&c.requests, "requests", 16, "request goroutines of the latency class, each with its own stream and cuBLAS handle")
	fs.BoolVar(&c.headroom, "headroom", false, "fold the unaccounted memory into the limit (WithUnaccountedHeadroom)")
	fs.BoolVar(&c.noWorkspace, "no-workspace", false, "leave the cuBLAS handles without a workspace from the quota (cuBLAS allocates its own)")
	fs.BoolVar(&c.sim, "sim", false, "use the simulated H200 even where there is a GPU")
	fs.StringVar(&c.cublas, "cublas", "", "path of libcublas, used as given (default: "+strings.Join(gemmjob.DefaultCublas, ", then ")+")")
	fs.BoolVar(&c.handle, "handle", false, "measure what a cuBLAS handle takes of the device, with and without a workspace from the quota, and exit")
	fs.IntVar(&c.handles, "handles", 4, "-handle: handles made of each kind")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.limitMiB == 0:
		return c, errors.New("-limit 0: want a positive MiB count")
	case c.duration <= 0 || c.sample <= 0:
		return c, fmt.Errorf("-duration %v, -sample %v: want both positive", c.duration, c.sample)
	case c.requests < 1 || c.handles < 1:
		return c, fmt.Errorf("-requests %d, -handles %d: want at least 1", c.requests, c.handles)
	}
	return c, nil
}

// open opens the pool on the GPU, or on the simulator where there is none
// (or -sim), and loads cuBLAS where there is a GPU; gemm says whether it
// did (the requests are GEMMs).
func open(ctx context.Context, c config, out io.Writer, opts ...fcsp.Option) (p *fcsp.Pool, gemm bool, err error) {
	if !c.sim {
		p, err = fcsp.Open(ctx, 0, opts...)
		if errors.Is(err, fcsp.ErrNoDriver) {
			fmt.Fprintf(out, "no GPU here (%v): running on the simulated H200; its memory figures are the fake driver's models\n", err)
		} else if err != nil {
			return nil, false, err
		}
	}
	if p == nil {
		p, err = fcsp.Open(ctx, 0, append(opts, fcsptest.SimulatedH200())...)
		return p, false, err
	}
	if c.cublas, err = gemmjob.LoadCublas(c.cublas); err != nil {
		fmt.Fprintf(out, "no cuBLAS (%v): requests take scratch memory from the quota instead of a GEMM\n", err)
		return p, false, nil
	}
	fmt.Fprintf(out, "cuBLAS %s\n", c.cublas)
	return p, true, nil
}

// GEMM shapes: the latency class's requests and the rest class's jobs.
const (
	reqM, reqN, reqK = 64, 4096, 4096
	batchN           = 8192
	// scratch is what a request takes from the quota on the simulator.
	scratch = 8 << 20
)

func run(ctx context.Context, c config, out io.Writer) error {
	if c.handle {
		return handleCost(ctx, c, out)
	}
	limit := c.limitMiB << 20
	opts := []fcsp.Option{fcsp.WithDeviceMemoryLimit(limit), fcsp.WithMemorySampling(c.sample),
		fcsp.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))}
	if c.headroom {
		opts = append(opts, fcsp.WithUnaccountedHeadroom())
	}
	pool, gemm, err := open(ctx, c, out, opts...)
	if err != nil {
		return err
	}
	defer pool.Close()
	fmt.Fprintf(out, "%s; WithDeviceMemoryLimit(%d MiB), sampled every %v, %d request goroutines, workspace from the quota: %v, headroom: %v\n",
		pool.Device(), c.limitMiB, c.sample, c.requests, !c.noWorkspace, c.headroom)

	rec := &recorder{limit: limit, pool: pool, every: c.sample}
	rec.row("open")
	warm := func(fcsp.Current) error { return nil }
	if gemm {
		warm = gemmjob.Warmup(reqM, reqN, reqK)
	}
	inter, err := pool.NewTenant("interactive", fcsp.WithLatencyTarget(300*time.Microsecond, 16, 48), fcsp.WithWarmup(warm))
	if err != nil {
		return fmt.Errorf("latency class: %w", err)
	}
	defer inter.Close()
	rec.row("latency class")
	batchWarm := func(fcsp.Current) error { return nil }
	if gemm {
		batchWarm = gemmjob.Warmup(batchN, batchN, batchN)
	}
	batch, err := pool.NewTenant("batch", fcsp.WithRestOfSMs(), fcsp.WithWarmup(batchWarm))
	if err != nil {
		return fmt.Errorf("rest class: %w", err)
	}
	defer batch.Close()
	rec.row("rest class")

	ctx, cancel := context.WithTimeout(ctx, c.duration)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, c.requests+1)
	for i := range c.requests {
		wg.Go(func() { errs <- requests(ctx, inter, gemm, c.noWorkspace, i) })
	}
	wg.Go(func() { errs <- batchJobs(ctx, batch, gemm) })
	for ctx.Err() == nil {
		rec.row("run") // at each of the pool's samples
	}
	wg.Wait()
	close(errs)
	var refused []error
	for err := range errs {
		switch {
		case err == nil, errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		case errors.Is(err, fcsp.ErrQuotaExceeded):
			refused = append(refused, err) // the limit held: a goroutine's memory did not fit
		default:
			return err
		}
	}
	rec.row("end")
	rec.write(out)
	if len(refused) > 0 {
		fmt.Fprintf(out, "%d of %d goroutines stopped, refused by the limit (it held); the first: %v\n", len(refused), c.requests+1, refused[0])
	}
	return nil
}

// requests is one request goroutine: its own stream and cuBLAS handle
// (its workspace from the class's quota), a GEMM per request.
func requests(ctx context.Context, t *fcsp.Tenant, gemm, noWorkspace bool, i int) error {
	s, err := t.NewStream(fcsp.ClassDefault)
	if err != nil {
		return fmt.Errorf("request goroutine %d: %w", i, err)
	}
	if !gemm {
		for ctx.Err() == nil {
			err := t.Do(ctx, func(cur fcsp.Current) error {
				w, err := cur.Workspace(s, scratch)
				if err != nil {
					return err
				}
				return w.Close()
			})
			if err != nil {
				return err
			}
			time.Sleep(100 * time.Microsecond) // the simulator's Do takes no time: leave the host's cores some
		}
		return nil
	}
	opts := []gemmjob.Option{gemmjob.WithStream(s)}
	if noWorkspace {
		opts = append(opts, gemmjob.WithoutWorkspace())
	}
	j, err := gemmjob.New(ctx, t, reqM, reqN, reqK, opts...)
	if err != nil {
		return fmt.Errorf("request goroutine %d: %w", i, err)
	}
	defer j.Close(context.Background())
	for ctx.Err() == nil {
		if err := j.Run(ctx); err != nil {
			return err
		}
		if err := s.SynchronizeContext(ctx); err != nil {
			return err
		}
	}
	return nil
}

// batchJobs keeps the rest class busy: 8192-cubed GEMMs back to back (a
// Do taking scratch memory on the simulator).
func batchJobs(ctx context.Context, t *fcsp.Tenant, gemm bool) error {
	if !gemm {
		return requests(ctx, t, false, false, -1)
	}
	j, err := gemmjob.New(ctx, t, batchN, batchN, batchN)
	if err != nil {
		return fmt.Errorf("rest class: %w", err)
	}
	defer j.Close(context.Background())
	for ctx.Err() == nil {
		if err := j.Run(ctx); err != nil {
			return err
		}
		if err := j.Stream().SynchronizeContext(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Row is one sample: the pool's figures, and the device's at the pool's
// last sample of NVML.
type Row struct {
	At          time.Duration
	Phase       string
	DeviceUsed  uint64 // the process, as NVML reports it (0: not sampled)
	MemoryUsed  uint64 // the tenants'
	Overhead    uint64 // the SDK's own objects'
	Greens      int    // green contexts made
	Unaccounted uint64 // DeviceUsed less what the pool counted
	Charged     uint64 // of Unaccounted, counted against the limit (-headroom)
	Reason      string // why DeviceUsed is 0
	sampled     time.Time
}

type recorder struct {
	limit uint64
	pool  *fcsp.Pool
	every time.Duration
	t0    time.Time
	rows  []Row
}

// row records the pool's figures at its next sample of NVML (or, where
// none comes within two periods, now).
func (r *recorder) row(phase string) {
	if r.t0.IsZero() {
		r.t0 = time.Now()
	}
	var last time.Time
	if n := len(r.rows); n > 0 {
		last = r.rows[n-1].sampled
	}
	s := r.pool.Stats()
	for end := time.Now().Add(2 * r.every); !s.DeviceMemory.At.After(last) && time.Now().Before(end); s = r.pool.Stats() {
		time.Sleep(r.every / 20)
	}
	dm := s.DeviceMemory
	r.rows = append(r.rows, Row{At: time.Since(r.t0), Phase: phase, DeviceUsed: dm.Used, MemoryUsed: s.MemoryUsed,
		Overhead: s.Overhead.Bytes, Greens: s.Overhead.GreenMade, Unaccounted: dm.Unaccounted, Charged: dm.Charged, Reason: dm.Reason, sampled: dm.At})
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// write prints the table and the verdict: whether the memory the SDK made
// (the tenants' and its own objects') ever passed the limit, and whether
// the process did, as NVML saw it.
func (r *recorder) write(out io.Writer) {
	fmt.Fprintf(out, "\n%8s  %-13s %10s %8s %10s %10s %7s %12s %10s\n", "t", "phase", "nvml MiB", "limit", "used MiB", "overhead", "greens", "unaccounted", "charged")
	var most, mostSDK, mostUn uint64
	var over, overSDK int
	for _, x := range r.rows {
		fmt.Fprintf(out, "%8s  %-13s %10.1f %8.0f %10.1f %10.1f %7d %12.1f %10.1f", x.At.Round(time.Millisecond), x.Phase, mib(x.DeviceUsed), mib(r.limit),
			mib(x.MemoryUsed), mib(x.Overhead), x.Greens, mib(x.Unaccounted), mib(x.Charged))
		if x.DeviceUsed == 0 && x.Reason != "" {
			fmt.Fprintf(out, "  (%s)", x.Reason)
		}
		fmt.Fprintln(out)
		sdk := x.MemoryUsed + x.Overhead
		most, mostSDK, mostUn = max(most, x.DeviceUsed), max(mostSDK, sdk), max(mostUn, x.Unaccounted)
		if sdk > r.limit {
			overSDK++
		}
		if x.DeviceUsed > r.limit {
			over++
		}
	}
	fmt.Fprintf(out, "\nmemory the SDK made (used + overhead): at most %.1f MiB of the %.0f MiB limit: ", mib(mostSDK), mib(r.limit))
	if overSDK == 0 {
		fmt.Fprintln(out, "never past it")
	} else {
		fmt.Fprintf(out, "PAST IT in %d of %d samples\n", overSDK, len(r.rows))
	}
	fmt.Fprintf(out, "the process as NVML saw it: at most %.1f MiB", mib(most))
	switch {
	case most == 0:
		fmt.Fprintln(out, " (not sampled)")
	case over == 0:
		fmt.Fprintln(out, ", never past the limit")
	default:
		fmt.Fprintf(out, ", past the limit in %d of %d samples; the most nobody counted: %.1f MiB (the primary context, what libraries keep for themselves; -headroom folds it in)\n",
			over, len(r.rows), mib(mostUn))
	}
}

// handleCost measures what a cuBLAS handle takes of the device beyond
// what the pool counts: the process's device memory (NVML, read at once:
// Pool.NVML) before and after each handle's making and first GEMM, less
// what the pool counted meanwhile (its matrices and workspace, the SDK's
// stream), with a workspace from the quota and without one.
func handleCost(ctx context.Context, c config, out io.Writer) error {
	pool, gemm, err := open(ctx, c, out, fcsp.WithMemorySampling(0))
	if err != nil {
		return err
	}
	defer pool.Close()
	if !gemm {
		fmt.Fprintln(out, "-handle needs a GPU and cuBLAS: nothing to measure")
		return nil
	}
	processUsed := func() uint64 { return pool.NVML().ProcessMemoryUsed }
	switch f := pool.NVML(); {
	case !f.Available:
		fmt.Fprintf(out, "no NVML (%s): nothing to measure\n", f.Reason)
		return nil
	case f.ProcessMemoryUsed == 0:
		// In a container NVML lists the host's pids: the device's figure
		// stands for the process's where it is alone on the device.
		fmt.Fprintf(out, "NVML lists no memory for this process (%v): the device's used memory is read instead (right only where the process is alone on it)\n", f.Refused)
		processUsed = func() uint64 { return pool.NVML().MemoryUsed }
	}
	t, err := pool.NewTenant("handles")
	if err != nil {
		return err
	}
	defer t.Close()
	fmt.Fprintf(out, "%s: %d cuBLAS handles of each kind, each on a stream of its own with one %dx%dx%d GEMM\n", pool.Device(), c.handles, reqM, reqN, reqK)
	fmt.Fprintf(out, "%-22s %14s %14s %16s\n", "handle", "process MiB", "counted MiB", "uncounted MiB")
	for _, noWs := range []bool{false, true} {
		name := "workspace from quota"
		if noWs {
			name = "its own workspace"
		}
		var jobs []*gemmjob.Job
		for range c.handles {
			proc0, counted0 := processUsed(), counted(pool)
			s, err := t.NewStream(fcsp.ClassDefault)
			if err != nil {
				return err
			}
			opts := []gemmjob.Option{gemmjob.WithStream(s)}
			if noWs {
				opts = append(opts, gemmjob.WithoutWorkspace())
			}
			j, err := gemmjob.New(ctx, t, reqM, reqN, reqK, opts...)
			if err != nil {
				return err
			}
			jobs = append(jobs, j)
			if err := errors.Join(j.Run(ctx), j.Check()); err != nil {
				return err
			}
			proc, count := processUsed(), counted(pool)
			dp, dc := proc-min(proc0, proc), count-min(counted0, count)
			fmt.Fprintf(out, "%-22s %14.1f %14.1f %16.1f\n", name, mib(dp), mib(dc), mib(dp-min(dp, dc)))
		}
		for _, j := range jobs {
			if err := j.Close(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func counted(p *fcsp.Pool) uint64 {
	s := p.Stats()
	return s.MemoryUsed + s.Overhead.Bytes
}
