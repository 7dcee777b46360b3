// Command throttle measures what an SM limit does to kernel throughput: two
// tenants on equal partitions launch the same kernel, one limited to a
// fraction of its launch rate, one not, and the program reports each one's
// kernels per second and their ratio against the configured split. A third
// phase runs the limited tenant's work on an NCCL-class stream, which must
// not be slowed.
//
// The kernel busy-waits a calibrated number of clock cycles, and one launch
// fills its partition for one refill period: the SM-limit model charges
// threads launched per period, so for such a kernel a limit f admits f of
// the full throughput. The throttle penalty is off here (NoThrottlePenalty)
// so that the configured fraction is what is measured; with the default
// penalty the admitted share is f / (0.9 x (1 + (1 - f))).
//
//	go run ./examples/throttle                 # GPU if present, else the simulator
//	go run ./examples/throttle -limit 0.25 -duration 2s -json
//	go run ./examples/throttle -mode share -limit 0.25 -duration 2s  # GPU shares, chain and cuBLAS GEMMs
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fcsp-go/fcsp-go/examples/internal/gemmjob"
	"github.com/fcsp-go/fcsp-go/examples/workload"
	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
)

// Result is the program's output.
type Result struct {
	Device        string  `json:"device"`
	Limit         float64 `json:"limit"`
	PartitionSMs  int     `json:"partition_sms"`
	KernelMs      float64 `json:"kernel_ms"`       // one launch alone, GPU clock
	LimitedPerS   float64 `json:"limited_per_s"`   // kernels/s, default class, limited tenant
	UnlimitedPerS float64 `json:"unlimited_per_s"` // kernels/s, other tenant, same time
	Ratio         float64 `json:"ratio"`           // limited / unlimited
	WithinTenPct  bool    `json:"within_10pct"`
	NCCLPerS      float64 `json:"nccl_per_s"` // limited tenant, NCCL-class stream
	// UnlimitedNCCLPhasePerS is the other tenant's rate during the NCCL
	// phase, the figure NCCLVsFree divides by (UnlimitedPerS is the first
	// phase's, the one Ratio divides by).
	UnlimitedNCCLPhasePerS float64 `json:"unlimited_nccl_phase_per_s"`
	NCCLVsFree             float64 `json:"nccl_vs_unlimited"` // NCCLPerS / UnlimitedNCCLPhasePerS
	Simulated              bool    `json:"simulated"`
}

func main() {
	limit := flag.Float64("limit", 0.25, "SM limit of the throttled tenant")
	dur := flag.Duration("duration", 2*time.Second, "how long each phase launches")
	simulate := flag.Bool("simulate", false, "use the simulated H200")
	asJSON := flag.Bool("json", false, "print JSON")
	mode := flag.String("mode", "rate", "rate: the SM limit's launch-rate model (calibrated kernel); share: WithGPUShare, no tuning")
	gemms := flag.Bool("gemm", true, "share mode: also cuBLAS GEMMs (1024^3, 8192^3), where cuBLAS and a GPU are present")
	cublasPath := flag.String("cublas", "", "share mode: path of libcublas, used as given (default: "+strings.Join(gemmjob.DefaultCublas, ", then ")+")")
	flag.Parse()
	if *mode == "share" {
		r, err := runShare(context.Background(), *limit, *dur, *simulate, *gemms, *cublasPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "throttle: FAIL:", err)
			os.Exit(1)
		}
		if *asJSON {
			json.NewEncoder(os.Stdout).Encode(r)
		} else {
			printShare(r)
		}
		for _, row := range r.Rows {
			if !r.Simulated && (!row.InBand || !r.lagOK(row)) {
				os.Exit(2)
			}
		}
		return
	}
	r, err := run(context.Background(), *limit, *dur, *simulate)
	if err != nil {
		fmt.Fprintln(os.Stderr, "throttle: FAIL:", err)
		os.Exit(1)
	}
	if *asJSON {
		json.NewEncoder(os.Stdout).Encode(r)
		return
	}
	fmt.Println(r.Device)
	fmt.Printf("two tenants of %d SMs; one kernel fills a partition for %.3f ms (GPU clock)\n", r.PartitionSMs, r.KernelMs)
	fmt.Printf("%-34s %12s\n", "phase", "kernels/s")
	fmt.Printf("%-34s %12.1f\n", fmt.Sprintf("limited to %.0f%% (default class)", 100*r.Limit), r.LimitedPerS)
	fmt.Printf("%-34s %12.1f\n", "unlimited neighbour", r.UnlimitedPerS)
	fmt.Printf("%-34s %12.3g (configured %.3f, within 10%%: %v)\n", "ratio", r.Ratio, r.Limit, r.WithinTenPct)
	fmt.Printf("%-34s %12.1f\n", "limited tenant, NCCL-class stream", r.NCCLPerS)
	fmt.Printf("%-34s %12.1f (NCCL stream %.2fx it)\n", "unlimited neighbour, same time", r.UnlimitedNCCLPhasePerS, r.NCCLVsFree)
	if r.Simulated {
		fmt.Println("(simulated: kernels take no time, so the unlimited rates and the ratio measure the host, not a GPU;")
		fmt.Println(" only the limited rate itself is meaningful)")
		return
	}
	if !r.WithinTenPct {
		os.Exit(2)
	}
}

func open(ctx context.Context, simulate bool, opts ...fcsp.Option) (*fcsp.Pool, error) {
	if !simulate {
		p, err := fcsp.Open(ctx, 0, opts...)
		if !errors.Is(err, fcsp.ErrNoDriver) {
			return p, err
		}
		fmt.Fprintf(os.Stderr, "no GPU here (%v): running on the simulated H200, where kernels take no time\n", err)
	}
	return fcsp.Open(ctx, 0, append(opts, fcsptest.SimulatedH200())...)
}

type worker struct {
	t  *fcsp.Tenant
	s  *fcsp.Stream
	fn *fcsp.Function
}

func newWorker(pool *fcsp.Pool, name string, opts ...fcsp.TenantOption) (*worker, error) {
	t, err := pool.NewTenant(name, opts...)
	if err != nil {
		return nil, err
	}
	fn, err := workload.Kernel(t, "spin")
	if err != nil {
		return nil, err
	}
	return &worker{t: t, s: t.Stream(), fn: fn}, nil
}

// launchFor launches one full wave per kernel on s until d has passed, and
// returns how many kernels completed per second (queued work included:
// the clock stops after the stream drains).
func (w *worker) launchFor(ctx context.Context, s *fcsp.Stream, grid, block fcsp.Dim3, args *fcsp.Args, d time.Duration) (float64, error) {
	start := time.Now()
	n := 0
	for time.Since(start) < d {
		if err := s.Launch(ctx, w.fn, grid, block, 0, args); err != nil {
			return 0, err
		}
		if n++; n%16 == 0 { // bound the queue so the clock measures the GPU, not submission
			if err := s.Synchronize(); err != nil {
				return 0, err
			}
		}
	}
	if err := s.Synchronize(); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func run(ctx context.Context, limit float64, d time.Duration, simulate bool) (Result, error) {
	probe, err := open(ctx, simulate)
	if err != nil {
		return Result{}, err
	}
	half := probe.Device().SMs / 2 / probe.Device().Granularity * probe.Device().Granularity
	simulate = probe.Device().Simulated
	probe.Close()
	pool, err := open(ctx, simulate, fcsp.WithPartitionUnit(half), fcsp.WithLimiterTuning(fcsp.LimiterTuning{ThrottlePenalty: fcsp.NoThrottlePenalty, Dampening: 1}))
	if err != nil {
		return Result{}, err
	}
	defer pool.Close()
	info := pool.Device()
	res := Result{Device: info.String(), Limit: limit, PartitionSMs: half, Simulated: info.Simulated}
	lim, err := newWorker(pool, "limited", fcsp.WithSMs(half), fcsp.WithSMLimit(limit))
	if err != nil {
		return res, err
	}
	free, err := newWorker(pool, "unlimited", fcsp.WithSMs(half))
	if err != nil {
		return res, err
	}
	// One wave: every resident thread of the partition, 1024 per block.
	threads := half * info.ThreadsPerSM
	grid, block := fcsp.Dim3{X: uint32(threads / 1024), Y: 1, Z: 1}, fcsp.Dim3{X: 1024, Y: 1, Z: 1}
	cycles, ms, err := calibrate(ctx, free, grid, block)
	if err != nil {
		return res, err
	}
	res.KernelMs = ms
	var args fcsp.Args
	args.Uint64(cycles)

	var wg sync.WaitGroup
	var errL, errF error
	wg.Add(2)
	go func() { defer wg.Done(); res.LimitedPerS, errL = lim.launchFor(ctx, lim.s, grid, block, &args, d) }()
	go func() { defer wg.Done(); res.UnlimitedPerS, errF = free.launchFor(ctx, free.s, grid, block, &args, d) }()
	wg.Wait()
	if err := errors.Join(errL, errF); err != nil {
		return res, err
	}
	res.Ratio = res.LimitedPerS / res.UnlimitedPerS
	res.WithinTenPct = res.Ratio >= 0.9*limit && res.Ratio <= 1.1*limit

	nccl, err := lim.t.NewStream(fcsp.ClassNCCL)
	if err != nil {
		return res, err
	}
	wg.Add(2)
	go func() { defer wg.Done(); res.NCCLPerS, errL = lim.launchFor(ctx, nccl, grid, block, &args, d) }()
	go func() {
		defer wg.Done()
		res.UnlimitedNCCLPhasePerS, errF = free.launchFor(ctx, free.s, grid, block, &args, d)
	}()
	wg.Wait()
	if err := errors.Join(errL, errF); err != nil {
		return res, err
	}
	res.NCCLVsFree = res.NCCLPerS / res.UnlimitedNCCLPhasePerS
	return res, nil
}

// calibrate finds the spin count that makes one wave last one refill
// period (1 ms), timing a trial launch with GPU events.
func calibrate(ctx context.Context, w *worker, grid, block fcsp.Dim3) (cycles uint64, ms float64, err error) {
	const period = 1.0 // ms, the pool's refill period
	cycles = 1 << 20
	for i := 0; i < 3; i++ {
		var args fcsp.Args
		args.Uint64(cycles)
		a, err := w.t.NewEvent()
		if err != nil {
			return 0, 0, err
		}
		b, err := w.t.NewEvent()
		if err != nil {
			return 0, 0, err
		}
		if err := a.Record(w.s); err != nil {
			return 0, 0, err
		}
		if err := w.s.Launch(ctx, w.fn, grid, block, 0, &args); err != nil {
			return 0, 0, err
		}
		if err := b.Record(w.s); err != nil {
			return 0, 0, err
		}
		if err := b.Synchronize(); err != nil {
			return 0, 0, err
		}
		d, err := b.Since(a)
		if err != nil {
			return 0, 0, err
		}
		a.Close()
		b.Close()
		ms = float64(d) / float64(time.Millisecond)
		if w.t.Pool().Device().Simulated { // kernels take no time there
			return cycles, period, nil
		}
		cycles = uint64(float64(cycles) * period / ms)
	}
	return cycles, ms, nil
}
