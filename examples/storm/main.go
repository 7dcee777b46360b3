// Command storm measures whether a partitioned tenant's isolation holds
// inside a busy server: an interactive class (m=64, n=k=4096
// bf16 cuBLAS GEMMs, one request at a time per goroutine, each through
// Tenant.Do on the goroutine's own stream and handle) beside a batch class
// (8192^3 GEMMs back to back), while other goroutines make the calls a
// server makes between requests, each paced at one call per -pace:
//
//	alloc      Alloc + Free of 1 MiB (the default allocator)
//	allocpool  AllocAsync + FreeAsync of 1 MiB on the goroutine's own stream
//	stream     NewStream + Close
//	meminfo    Tenant.MemGetInfo
//	stats      Tenant.Stats and Pool.ReadStats (into the goroutine's PoolStats)
//	scrape     Gather of fcspprom.NewGatherer: what a server's /metrics serves
//	tenant     a third tenant (unpartitioned, 64 MiB quota) made and closed
//
// in five layouts: alone (interactive on its 16 SMs, no batch), partitioned
// (16 SMs + the rest), plainbatch (16 SMs + a batch class made with no SM
// option, which runs on the SMs no partition holds), shared (both
// unpartitioned) and mps (each class a
// process of this binary on the plain device under NVIDIA MPS at 12% / 88%
// active threads, the storm in those processes and a third one). Rounds
// interleave the layouts so that drift meets all alike. A %smid probe runs
// on each class every -probe-every during the storm; in the partitioned
// layout the SM sets must not meet (exit 1 if they do).
//
//	storm [-layouts alone,partitioned,shared] [-k 1,4,16] [-storm none,...,all] [-rounds 3]
//	      [-duration 2s] [-warmup 300ms] [-storm-g 16] [-pace 100us] [-full] [-json out.json]
//
// Two modes of their own measure SMs that follow the load
// (fcsp.WithLatencyTarget) and a fresh tenant's first requests, in place of
// the matrix (burst.go, cold.go):
//
//	storm -burst 3s/1s -cycles 4 [-burst-layouts split16,split32,split48,steer,mps,...] [-chart burst.svg]
//	storm -coldstart 1s/2s [-cold-variants cold,warmup,doeach]
//
// A third measures a tenant whose kernel never ends (fcsp.WithStallTimeout)
// beside the two classes, in a server process that then shuts down, exits
// and is replaced, and the same stuck kernel under MPS (stall.go):
//
//	storm -stall 2s/2s -stall-bound 200ms [-stall-variants sdk,mps] [-rounds 3]
//
// Without cuBLAS (or on the simulator, where there is no GPU) the requests
// are launches of the chain kernel instead, and the figures say "chain".
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fcsp-go/fcsp-go/examples/internal/gemmjob"
	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(1)
	}
}

var layoutNames = []string{"alone", "partitioned", "plainbatch", "shared", "mps"}

type config struct {
	cublas     string
	simulate   bool
	layouts    []string
	logMoves   bool // -log-moves
	ks         []int
	storms     []string
	kindKs     []int // Ks at which the single kinds run (partitioned; every layout with -full)
	full       bool
	stormG     int
	batchK     int // 0: K
	pace       time.Duration
	duration   time.Duration
	warmup     time.Duration
	rounds     int
	interSMs   int
	probeEvery time.Duration
	jsonPath   string
	maxConn    bool
	wait       string // -wait as given: "driver" or a spin duration
	spin       time.Duration
	cpuProfile string
	memProfile string
	tracePath  string
	traceKinds []string
	heapMiB    int

	bursts burstCfg // -burst: a bursty load instead of the storm matrix
	cold   coldCfg  // -coldstart: a fresh tenant instead of the storm matrix
	stall  stallCfg // -stall: a tenant's kernel that never ends, instead of the storm matrix

	mpsRole            string
	mpsStart, mpsStop  string
	mpsInter, mpsBatch int

	// matrixGiven: a flag that sizes the matrix was given; without one, a
	// run on the simulator is short (short).
	matrixGiven bool
}

// matrixFlags are the flags that size the storm matrix.
var matrixFlags = []string{"layouts", "k", "storm", "kind-k", "full", "batch-k", "storm-g", "pace", "duration", "warmup", "rounds", "inter-sms", "maxconn"}

// short is the matrix a run on the simulator makes when no flag sizes it:
// one layout at K=1, without and with every storm, once, in a few seconds.
// It shows what the program prints; the full matrix (2 min 40 s there)
// measures nothing a GPU's would.
func (c config) short() config {
	c.layouts, c.ks, c.kindKs, c.storms = []string{"partitioned"}, []int{1}, []int{1}, []string{stormNone, stormAll}
	c.rounds, c.duration, c.warmup, c.maxConn = 1, 300*time.Millisecond, 50*time.Millisecond, false
	c.stormG, c.pace = 2, time.Millisecond
	return c
}

// serverState is mib MiB of live heap in 64 KiB blocks that hold pointers
// to each other, so that the collector marks them as it would a server's
// maps and caches.
func serverState(mib int) []*stateBlock {
	blocks := make([]*stateBlock, mib*16)
	for i := range blocks {
		blocks[i] = new(stateBlock)
		if i > 0 {
			blocks[i][0] = blocks[i-1]
		}
	}
	return blocks
}

type stateBlock [8192]*stateBlock

// Errors of flag validation, one per meaning.
var (
	ErrBadList   = errors.New("bad list")
	ErrBadValue  = errors.New("bad value")
	ErrUnknown   = errors.New("unknown name")
	ErrNeedsOne  = errors.New("an -mps-role process runs one cell")
	ErrSMOverlap = errors.New("the classes' SM sets overlap in a partitioned layout")
)

func parse(args []string, usage io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("storm", flag.ContinueOnError)
	fs.SetOutput(usage)
	fs.StringVar(&c.cublas, "cublas", "", "path of libcublas, used as given (default: "+strings.Join(gemmjob.DefaultCublas, ", then ")+"); without it the requests are chain kernels")
	fs.BoolVar(&c.logMoves, "log-moves", false, "log the pool's debug lines to stderr: each SM move of the controller (rule, reason, what it took) and each Reshape")
	fs.BoolVar(&c.simulate, "simulate", false, "use the simulated H200 even where a GPU is present")
	layouts := fs.String("layouts", "alone,partitioned,shared", "layouts to run each round, comma-separated: alone, partitioned, plainbatch (batch made with no SM option beside the partition), shared, mps")
	ks := fs.String("k", "1,4,16", "request goroutines per class, one row set per value")
	storms := fs.String("storm", "none,"+strings.Join(stormKinds, ",")+",all", "storm rows: none, "+strings.Join(stormKinds, ", ")+", all")
	kindKs := fs.String("kind-k", "1", "the K values at which single storm kinds run in the partitioned layout (none and all run at every K; -full: every kind at every K in every layout)")
	fs.BoolVar(&c.full, "full", false, "run every storm row at every K in every layout (several times longer)")
	fs.IntVar(&c.batchK, "batch-k", 0, "batch goroutines (0: the same K as the interactive class); each waits for its GEMMs in a stream synchronisation that may spin a core")
	fs.IntVar(&c.stormG, "storm-g", 16, "racing goroutines per class per storm kind (0: K)")
	fs.DurationVar(&c.pace, "pace", 100*time.Microsecond, "each storm goroutine makes one call per this period")
	fs.DurationVar(&c.duration, "duration", 2*time.Second, "measurement per cell")
	fs.DurationVar(&c.warmup, "warmup", 300*time.Millisecond, "time each cell runs before it measures")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds; each runs every layout in turn")
	fs.IntVar(&c.interSMs, "inter-sms", 16, "the interactive partition's SMs (alone, partitioned)")
	fs.DurationVar(&c.probeEvery, "probe-every", 50*time.Millisecond, "a %smid probe on each class every this long (0: none)")
	fs.StringVar(&c.jsonPath, "json", "", "write every cell, the summary and the checks as JSON to this file")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (go tool pprof) to this file")
	fs.StringVar(&c.memProfile, "memprofile", "", "write an allocation profile of the whole run (every allocation sampled; go tool pprof -sample_index=alloc_space) to this file")
	fs.StringVar(&c.tracePath, "trace", "", "write an execution trace (go tool trace) of the first 150 ms of the first measured cell of each -trace-kinds storm to <this>-<storm>.trace")
	traceKinds := fs.String("trace-kinds", "none,all", "the storm rows -trace traces, comma-separated")
	fs.IntVar(&c.heapMiB, "heap", 0, "MiB of live heap the process holds throughout, as a server's own state would (0: none, the storm's few MiB alone): the collector runs about as often as heap growth / live heap, so a small process collects far more often than a server making the same calls")
	fs.StringVar(&c.wait, "wait", "default", "how goroutines wait for their GPU work (fcsp.WithHostWait): default (the SDK's: the driver's while few wait, polled past half the cores), driver (cuStreamSynchronize) or a spin duration (poll that long, then yield between polls)")
	fs.BoolVar(&c.maxConn, "maxconn", true, "also run the partitioned layout (K=1, no storm) once in a child process with CUDA_DEVICE_MAX_CONNECTIONS=1 and report what the SDK says")
	burst := fs.String("burst", "", "quiet/burst durations (e.g. 3s/1s): run a bursty interactive class (1 request goroutine, then 16) beside the batch class in the -burst-layouts instead of the storm matrix")
	fs.IntVar(&c.bursts.cycles, "cycles", 4, "-burst: quiet+burst cycles per cell")
	burstLayouts := fs.String("burst-layouts", strings.Join(burstLayoutNames[:4], ","), "-burst: layouts, comma-separated: split16, split32, split40, split48 (the interactive class on that many SMs, the batch on the rest), steer (WithLatencyTarget(-target, 16, 48), the batch's queue bounded by the default horizon), steer-nobound (the same with WithQueueHorizon(NoQueueHorizon)), steer-rel (WithRelativeLatencyTarget(-target-relative, 16, 48)), steer-r48 (WithLatencyTarget(-target-relative x the round's split48 burst P99, 16, 48)), steer-idle and steer-idle-nobound (steer and steer-nobound with no interactive request: the batch alone), mps (each class a process under MPS at -mps-inter-pct / -mps-batch-pct, the daemon started by -mps-start)")
	fs.DurationVar(&c.bursts.target, "target", 300*time.Microsecond, "-burst: the interactive class's P99 target (steer's, and every layout's recovery)")
	fs.Float64Var(&c.bursts.split48x, "target-split48", 0, "-burst: steer's (and steer-nobound's) target as this factor of the same round's split48 burst P99, in place of -target (split48 runs before them); 0: -target")
	fs.DurationVar(&c.bursts.horizon, "queue-horizon", 0, "-burst: the batch's queue bound in the bounded steer layouts (WithQueueHorizon); 0: the SDK's default")
	fs.Float64Var(&c.bursts.relFactor, "target-relative", 1.2, "-burst: steer-rel's factor (WithRelativeLatencyTarget), and the recoveries' target as that factor of split48's burst P99 where split48 runs")
	fs.StringVar(&c.bursts.chart, "chart", "", "-burst: draw the first round's SMs per class and interactive P99 over time into this SVG file")
	coldstart := fs.String("coldstart", "", "first/steady durations (e.g. 1s/2s): run a cold start (16 request goroutines on a fresh tenant beside the batch class, the first window against the steady one after it) in the -cold-variants instead of the storm matrix")
	coldVars := fs.String("cold-variants", strings.Join(coldVariants, ","), "-coldstart: variants, comma-separated: cold (no warm-up), warmup (fcsp.WithWarmup, no DoEach), doeach (Tenant.DoEach before serving)")
	fs.StringVar(&c.mpsRole, "mps-role", "", "internal to the mps layout: run one side (interactive, batch or storm) of one cell on the plain device")
	fs.StringVar(&c.mpsStart, "mps-start", "nvidia-cuda-mps-control -d", "shell command that starts the MPS daemon before each round's mps layout (empty: none)")
	fs.StringVar(&c.mpsStop, "mps-stop", "echo quit | nvidia-cuda-mps-control", "shell command that stops it after (empty: none)")
	fs.IntVar(&c.mpsInter, "mps-inter-pct", 12, "mps: the interactive process's CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
	fs.IntVar(&c.mpsBatch, "mps-batch-pct", 88, "mps: the batch process's CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
	c.stall.register(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	fs.Visit(func(f *flag.Flag) { c.matrixGiven = c.matrixGiven || slices.Contains(matrixFlags, f.Name) })
	switch d, err := time.ParseDuration(c.wait); {
	case c.wait == "default":
	case c.wait == "driver":
		c.spin = fcsp.SpinInDriver
	case err != nil || d < 0:
		return c, fmt.Errorf("%w: -wait %q: want default, driver or a duration of 0 or more", ErrBadValue, c.wait)
	default:
		c.spin = d
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("%w: unexpected arguments %q", ErrBadValue, fs.Args())
	}
	var err error
	if *burst != "" {
		if c.bursts.quiet, c.bursts.burst, err = parseBurst(*burst); err != nil {
			return c, err
		}
		if c.bursts.layouts, err = parseNames("burst-layouts", *burstLayouts, burstLayoutNames); err != nil {
			return c, err
		}
		if c.bursts.cycles < 1 || c.bursts.target <= 0 {
			return c, fmt.Errorf("%w: -cycles %d, -target %v: want at least 1 and a positive target", ErrBadValue, c.bursts.cycles, c.bursts.target)
		}
		if f := c.bursts.split48x; f != 0 && !(f >= 1 && f <= 1000) {
			return c, fmt.Errorf("%w: -target-split48 %v: want 0 (off) or a factor from 1 to 1000", ErrBadValue, f)
		}
		if !(c.bursts.relFactor >= 1 && c.bursts.relFactor <= 1000) {
			return c, fmt.Errorf("%w: -target-relative %v: want a factor from 1 to 1000", ErrBadValue, c.bursts.relFactor)
		}
		if h := c.bursts.horizon; h < 0 || h > time.Second {
			return c, fmt.Errorf("%w: -queue-horizon %v: want 0 (the SDK's default) or a horizon up to 1s", ErrBadValue, h)
		}
		c.bursts.batchK = max(c.batchK, 2)
	}
	if *coldstart != "" {
		if c.cold.first, c.cold.steady, err = parsePair("coldstart", *coldstart, "1s/2s"); err != nil {
			return c, err
		}
		if c.cold.variants, err = parseNames("cold-variants", *coldVars, coldVariants); err != nil {
			return c, err
		}
	}
	if err := c.stall.parse(); err != nil {
		return c, err
	}
	if c.layouts, err = parseNames("layouts", *layouts, layoutNames); err != nil {
		return c, err
	}
	if c.storms, err = parseNames("storm", *storms, append([]string{stormNone, stormAll}, stormKinds...)); err != nil {
		return c, err
	}
	if c.ks, err = parseInts("k", *ks); err != nil {
		return c, err
	}
	if c.kindKs, err = parseInts("kind-k", *kindKs); err != nil {
		return c, err
	}
	if c.traceKinds, err = parseNames("trace-kinds", *traceKinds, append([]string{stormNone, stormAll}, stormKinds...)); err != nil {
		return c, err
	}
	switch {
	case c.batchK < 0:
		return c, fmt.Errorf("%w: -batch-k %d: want 0 (K) or more", ErrBadValue, c.batchK)
	case c.stormG < 0:
		return c, fmt.Errorf("%w: -storm-g %d: want 0 (K) or more", ErrBadValue, c.stormG)
	case c.heapMiB < 0:
		return c, fmt.Errorf("%w: -heap %d: want 0 or more MiB", ErrBadValue, c.heapMiB)
	case c.pace <= 0:
		return c, fmt.Errorf("%w: -pace %v: want more than 0", ErrBadValue, c.pace)
	case c.duration <= 0:
		return c, fmt.Errorf("%w: -duration %v: want more than 0", ErrBadValue, c.duration)
	case c.warmup < 0:
		return c, fmt.Errorf("%w: -warmup %v: want 0 or more", ErrBadValue, c.warmup)
	case c.rounds < 1:
		return c, fmt.Errorf("%w: -rounds %d: want at least 1", ErrBadValue, c.rounds)
	case c.interSMs < 1:
		return c, fmt.Errorf("%w: -inter-sms %d: want at least 1", ErrBadValue, c.interSMs)
	case c.probeEvery < 0:
		return c, fmt.Errorf("%w: -probe-every %v: want 0 (none) or more", ErrBadValue, c.probeEvery)
	case c.mpsInter < 1 || c.mpsInter > 100 || c.mpsBatch < 1 || c.mpsBatch > 100:
		return c, fmt.Errorf("%w: -mps-inter-pct %d, -mps-batch-pct %d: want 1 to 100", ErrBadValue, c.mpsInter, c.mpsBatch)
	}
	switch c.mpsRole {
	case "":
	case "interactive", "batch", "storm":
		if len(c.ks) != 1 || len(c.storms) != 1 {
			return c, fmt.Errorf("%w: -mps-role %s wants one -k and one -storm, got %v and %v", ErrNeedsOne, c.mpsRole, c.ks, c.storms)
		}
	default:
		return c, fmt.Errorf("%w: -mps-role %q: want interactive, batch or storm", ErrUnknown, c.mpsRole)
	}
	return c, nil
}

func parseNames(flagName, s string, allowed []string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(allowed, f) {
			return nil, fmt.Errorf("%w: -%s: %q (want some of %s)", ErrUnknown, flagName, f, strings.Join(allowed, ", "))
		}
		if slices.Contains(out, f) {
			return nil, fmt.Errorf("%w: -%s: %s twice", ErrBadList, flagName, f)
		}
		out = append(out, f)
	}
	return out, nil
}

func parseInts(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: -%s: %q is not a count above 0", ErrBadList, flagName, f)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("%w: -%s: %d twice", ErrBadList, flagName, n)
		}
		out = append(out, n)
	}
	return out, nil
}

// cellKey is one row of the plan.
type cellKey struct {
	k     int
	storm string
}

// plan is the cells one layout runs each round, in order: alone has no
// neighbour to race with but the storm, so it gives the no-storm floor
// only; partitioned runs the single kinds at -kind-k; every layout runs
// none and all at every K. -full runs everything everywhere.
func (c config) plan(layout string) []cellKey {
	var out []cellKey
	for _, k := range c.ks {
		for _, s := range c.storms {
			ok := c.full || s == stormNone ||
				(s == stormAll && layout != "alone") ||
				(layout == "partitioned" && slices.Contains(c.kindKs, k))
			if ok {
				out = append(out, cellKey{k, s})
			}
		}
	}
	return out
}

func (c config) batchKFor(k int) int {
	if c.batchK == 0 {
		return k
	}
	return c.batchK
}

func (c config) stormGFor(k int) int {
	if c.stormG == 0 {
		return k
	}
	return c.stormG
}

// logger sends the pool's warnings (and worse) to w, so that what the SDK
// says at Open (CUDA_DEVICE_MAX_CONNECTIONS, say) is seen.
// With -log-moves, its debug lines too: each SM move of the controller and
// each Reshape, with what it took.
func logger(w io.Writer, debug bool) *slog.Logger {
	level := slog.LevelWarn
	if debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// opener opens the pool for each layout; it falls back to the simulator
// where there is no driver, and says so once.
type opener struct {
	cfg  config
	errw io.Writer
	out  io.Writer
	said bool
	// device is the last pool's device, for the report.
	device string
	// tap, where set, wraps the pool's log handler: -burst reads each SM
	// move's debug lines through it.
	tap func(slog.Handler) slog.Handler
	// extra are options every pool it opens gets (-stall's watchdog).
	extra []fcsp.Option
}

// simulated reports whether the runs will be on the simulator, and why
// (-simulate, or no driver: then the opener has said so).
func (o *opener) simulated(ctx context.Context) (string, bool) {
	if o.cfg.simulate {
		return "-simulate", true
	}
	p, err := fcsp.Open(ctx, 0)
	if errors.Is(err, fcsp.ErrNoDriver) {
		o.said = true // said in the first line instead
		return fmt.Sprintf("no GPU here (%v)", err), true
	}
	if err == nil {
		_ = p.Close()
	}
	return "", false
}

func (o *opener) open(ctx context.Context) (*fcsp.Pool, error) {
	p, err := o.open1(ctx)
	if err == nil {
		o.device = p.Device().String()
	}
	return p, err
}

func (o *opener) open1(ctx context.Context) (*fcsp.Pool, error) {
	log := logger(o.errw, o.cfg.logMoves)
	if o.tap != nil {
		log = slog.New(o.tap(log.Handler()))
	}
	opts := append([]fcsp.Option{fcsp.WithLogger(log)}, o.extra...)
	if o.cfg.wait != "default" {
		opts = append(opts, fcsp.WithHostWait(o.cfg.spin))
	}
	if o.cfg.simulate {
		return fcsp.Open(ctx, 0, append(opts, fcsptest.SimulatedH200())...)
	}
	p, err := fcsp.Open(ctx, 0, opts...)
	if errors.Is(err, fcsp.ErrNoDriver) {
		if !o.said {
			fmt.Fprintf(o.out, "no GPU here (%v): running on the simulated H200; its timings mean nothing\n", err)
			o.said = true
		}
		return fcsp.Open(ctx, 0, append(opts, fcsptest.SimulatedH200())...)
	}
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	return p, nil
}

// loadCublas loads cuBLAS once for the process; without it the requests
// are chain kernels.
func loadCublas(cfg *config, out io.Writer) bool {
	var err error
	if cfg.cublas, err = gemmjob.LoadCublas(cfg.cublas); err != nil {
		fmt.Fprintf(out, "no cuBLAS (%v): the requests are chain kernels, not GEMMs\n", err)
		return false
	}
	return true
}

func run(ctx context.Context, args []string, out, errw io.Writer) error {
	cfg, err := parse(args, errw)
	if err != nil {
		return err
	}
	if cfg.mpsRole != "" {
		return runRole(ctx, cfg, out, errw)
	}
	if cfg.stall.role != "" {
		return runStallRole(ctx, cfg, out, errw)
	}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cellTrace.prefix, cellTrace.kinds = cfg.tracePath, cfg.traceKinds
	if cfg.memProfile != "" {
		runtime.MemProfileRate = 1
		defer func() {
			if f, err := os.Create(cfg.memProfile); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
		}()
	}
	state := serverState(cfg.heapMiB)
	defer runtime.KeepAlive(state)
	op := &opener{cfg: cfg, errw: errw, out: out}
	if !cfg.matrixGiven && !cfg.loadMode() {
		if why, sim := op.simulated(ctx); sim {
			full := cfg.estimate()
			cfg = cfg.short()
			op.cfg = cfg
			fmt.Fprintf(out, "storm: %s, so a short run on the simulated H200, about %v: one layout (partitioned) at K=1, with no storm and with all, "+
				"to show what the program prints (a partitioned class's P99 and the batch class's throughput while a server's calls storm, with a %%smid check that the classes' SMs do not meet). "+
				"The simulator's timings are not a GPU's, so its checks are reported, not judged; -layouts, -k, -storm, -rounds or -duration run the full matrix (about %v here), a GPU's measure.\n",
				why, cfg.estimate().Round(time.Second), full.Round(10*time.Second))
		}
	}
	haveCublas := loadCublas(&cfg, out)
	if cfg.loadMode() {
		return runLoadModes(ctx, op, cfg, haveCublas, args, out)
	}
	est := cfg.estimate()
	fmt.Fprintf(out, "storm: layouts %s, K %v, storm %s by %d goroutines per class per kind at one call per %v, %d round(s) of %v + %v warm-up per cell, waits -wait %s, %d MiB of server state: about %v\n",
		strings.Join(cfg.layouts, ","), cfg.ks, strings.Join(cfg.storms, ","), cfg.stormG, cfg.pace, cfg.rounds, cfg.duration, cfg.warmup, cfg.wait, cfg.heapMiB, est.Round(time.Second))

	rep := report{Args: args}
	start := time.Now()
	for round := 1; round <= cfg.rounds; round++ {
		for _, layout := range cfg.layouts {
			var cells []Cell
			var chk SMCheck
			var err error
			if layout == "mps" {
				cells, chk, err = runMPSLayout(ctx, cfg, round, out, errw)
			} else {
				cells, chk, err = runLayout(ctx, op, cfg, haveCublas, layout, round, out)
			}
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round, layout, err)
			}
			rep.Cells = append(rep.Cells, cells...)
			if op.device != "" {
				rep.Device = op.device
			}
			rep.SMChecks = append(rep.SMChecks, chk)
			fmt.Fprintln(out, chk)
		}
	}
	if cfg.maxConn {
		row := runMaxConn(ctx, cfg, out)
		rep.MaxConn = &row
	}
	rep.WallSeconds = time.Since(start).Seconds()
	rep.finish(cfg)
	if err := rep.write(out, cfg.jsonPath); err != nil {
		return err
	}
	return rep.smError()
}

// loadMode says that a mode of its own (-burst, -coldstart, -stall) runs
// in place of the storm matrix.
func (c config) loadMode() bool { return c.bursts.quiet > 0 || c.cold.first > 0 || c.stall.before > 0 }

// loadModes is what -burst, -coldstart and -stall write with -json.
type loadModes struct {
	Args      []string     `json:"args"`
	Bursts    []BurstRow   `json:"bursts,omitempty"`
	ColdStart []ColdRow    `json:"cold_start,omitempty"`
	Stall     *StallReport `json:"stall,omitempty"`

	// BurstReport is -burst's summary per layout and its checks.
	BurstReport *BurstReport `json:"burst_report,omitempty"`
}

// runLoadModes runs -burst's layouts, then -coldstart's variants, then
// -stall's, as asked.
func runLoadModes(ctx context.Context, op *opener, cfg config, haveCublas bool, args []string, out io.Writer) error {
	rep := loadModes{Args: args}
	var err error
	if cfg.bursts.quiet > 0 {
		rep.Bursts, rep.BurstReport, err = runBursts(ctx, op, cfg, haveCublas, out)
	}
	if err == nil && cfg.cold.first > 0 {
		if cfg.bursts.quiet > 0 {
			fmt.Fprintln(out)
		}
		rep.ColdStart, err = runCold(ctx, op, cfg, haveCublas, out)
	}
	if err == nil && cfg.stall.before > 0 {
		if cfg.bursts.quiet > 0 || cfg.cold.first > 0 {
			fmt.Fprintln(out)
		}
		rep.Stall, err = runStall(ctx, cfg, out, op.errw)
	}
	if cfg.jsonPath != "" {
		js, e := json.MarshalIndent(rep, "", "  ")
		if e == nil {
			e = os.WriteFile(cfg.jsonPath, js, 0o644)
		}
		err = errors.Join(err, e)
	}
	return err
}

// estimate is the run's wall time, roughly, as measured on the H200: every
// cell's warm-up and duration and 0.4 s more (1.5 s more under MPS, where
// each side is a process that loads cuBLAS), and two seconds per layout and
// round (the pool, the tenants, the daemon).
func (c config) estimate() time.Duration {
	var d time.Duration
	for _, l := range c.layouts {
		per := c.warmup + c.duration + 400*time.Millisecond
		if l == "mps" {
			per += 1500 * time.Millisecond
		}
		d += time.Duration(len(c.plan(l)))*per + 2*time.Second
	}
	d *= time.Duration(c.rounds)
	if c.maxConn {
		d += c.warmup + c.duration + 5*time.Second
	}
	return d
}

// runLayout runs one in-process layout's cells in one round, on a pool of
// its own (opened here and closed after, so that no context is left when
// the mps layout starts the daemon).
func runLayout(ctx context.Context, op *opener, cfg config, haveCublas bool, layout string, round int, out io.Writer) (cells []Cell, chk SMCheck, err error) {
	chk = SMCheck{Round: round, Layout: layout, MustBeDisjoint: layout == "partitioned" || layout == "plainbatch"}
	pool, err := op.open(ctx)
	if err != nil {
		return nil, chk, err
	}
	defer func() { err = errors.Join(err, pool.Close()) }()
	wk := workFor(pool, haveCublas)
	var interOpts, batchOpts []fcsp.TenantOption
	if layout != "shared" {
		interOpts = append(interOpts, fcsp.WithSMs(cfg.interSMs))
	}
	if layout == "partitioned" {
		batchOpts = append(batchOpts, fcsp.WithRestOfSMs())
	}
	maxK := slices.Max(cfg.ks)
	it, err := pool.NewTenant("interactive", interOpts...)
	if err != nil {
		return nil, chk, err
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	inter, err := newClass(ctx, "interactive", it, false, maxK, wk)
	if err != nil {
		return nil, chk, err
	}
	defer func() { err = errors.Join(err, inter.close(ctx)) }()
	if cfg.probeEvery > 0 {
		if inter.probe, err = newProbe(ctx, it, pool.Device().SMs); err != nil {
			return nil, chk, err
		}
	}
	var batch *class
	if layout != "alone" {
		bt, e := pool.NewTenant("batch", batchOpts...)
		if e != nil {
			return nil, chk, e
		}
		defer func() { err = errors.Join(err, bt.Close()) }()
		if batch, err = newClass(ctx, "batch", bt, true, cfg.batchKFor(maxK), wk); err != nil {
			return nil, chk, err
		}
		defer func() { err = errors.Join(err, batch.close(ctx)) }()
		if cfg.probeEvery > 0 {
			if batch.probe, err = newProbe(ctx, bt, pool.Device().SMs); err != nil {
				return nil, chk, err
			}
		}
	}
	env := cellEnv{inter: inter, batch: batch, storm: newStormEnv(pool)}
	for _, key := range cfg.plan(layout) {
		c, err := runCell(ctx, env, cellOpts{k: key.k, batchK: cfg.batchKFor(key.k), kind: key.storm, stormG: cfg.stormGFor(key.k), pace: cfg.pace, probe: cfg.probeEvery},
			timed{cfg.warmup, cfg.duration})
		if err != nil {
			return cells, chk, fmt.Errorf("K=%d storm %s: %w", key.k, key.storm, err)
		}
		c.Round, c.Layout, c.Work, c.InterSMs, c.Simulated = round, layout, wk.String(), it.SMs(), pool.Device().Simulated
		if batch != nil {
			c.BatchSMs = batch.t.SMs()
		}
		fmt.Fprintln(out, c)
		cells = append(cells, c)
	}
	if inter.probe != nil {
		var n int
		chk.Interactive, n, chk.NotComputed = inter.probe.take()
		chk.Launches += n
	}
	if batch != nil && batch.probe != nil {
		var n int
		var nc bool
		chk.Batch, n, nc = batch.probe.take()
		chk.Launches += n
		chk.NotComputed = chk.NotComputed || nc
	}
	chk.Overlap = intersect(chk.Interactive, chk.Batch)
	return cells, chk, nil
}

func (c Cell) String() string {
	s := fmt.Sprintf("round %d %-11s K=%-2d storm %-9s interactive %3d SMs: P50 %7.1f us  P99 %8.1f us  max %9.1f us  %8.0f req/s",
		c.Round, c.Layout, c.K, c.Storm, c.InterSMs, c.P50us, c.P99us, c.MaxUs, c.ReqPerS)
	if c.BatchGEMMs > 0 {
		s += fmt.Sprintf("  batch %6.1f TFLOP/s", c.BatchTFLOPs)
	}
	s += fmt.Sprintf("  CPU %5.2f cores", c.CPU)
	if len(c.StormPerS) > 0 {
		var tot float64
		for _, v := range c.StormPerS {
			tot += v
		}
		s += fmt.Sprintf("  storm %.0f calls/s", tot)
	}
	return s + " [" + c.Work + "]"
}

func (s SMCheck) String() string {
	switch {
	case s.NotComputed:
		return fmt.Sprintf("round %d %s: %%smid probe launched %d times on the simulator, which does not run it: no SM sets", s.Round, s.Layout, s.Launches)
	case s.Launches == 0:
		return fmt.Sprintf("round %d %s: no %%smid probes", s.Round, s.Layout)
	}
	v := fmt.Sprintf("round %d %s: %%smid (%d probes): interactive ran on %d SMs, batch on %d, overlap %d", s.Round, s.Layout, s.Launches, len(s.Interactive), len(s.Batch), len(s.Overlap))
	if s.MustBeDisjoint {
		if len(s.Overlap) > 0 {
			return v + fmt.Sprintf(" FAIL: SMs %v ran both classes", s.Overlap)
		}
		return v + " PASS"
	}
	return v
}
