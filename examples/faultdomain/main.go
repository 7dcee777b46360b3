// Command faultdomain runs the layout for request classes that must survive
// each other's faults: one process per class, sharing one node-wide memory
// limit through the shared region. Tenants of one process share fate (a
// green context isolates SMs, not faults: one kernel's illegal address
// poisons every context of the process), processes do not.
//
// The parent serves (allocates, launches and checks a kernel, frees, in a
// loop) while a child process, sharing the region, holds memory, faults its
// device with a kernel given a bad address, and is then killed with
// SIGKILL, so that it never gives its memory back itself. The parent keeps
// serving throughout, and the node's accounting heals: the survivors'
// reaper returns the shared total to exactly the parent's own usage.
//
// The faulted child cannot recover in-process: the driver keeps a sticky
// fault through a reset of the primary context (on the H200 the next
// retain answers CUDA_ERROR_ILLEGAL_ADDRESS; Health says RestartRequired). The way
// back is a new process, so the parent, as a supervisor would, then starts
// a new child that joins the same region, allocates and serves checked
// requests: the node heals and the restarted process is usable.
//
// It measures two figures, on wall-clock marks both processes
// take as UnixNano on the one host. First, the time from the child seeing
// its fault to the replacement's first checked request, step by step: the
// parent learns of it, kills the child, the region reaps it, the
// replacement starts, runs, opens its pool, loads its module and serves.
// Second, the parent's request latency (P50, P99, max) in a quiet window
// beside the idle child before it faults (-quiet) and in the fault window,
// from the child's bad launch to the replacement serving, with the ratio
// of the two P99s (the goal: within 1.2x). A window with fewer than
// -min-requests requests is extended until it holds them, and says so.
// Both are printed as markdown tables, and written to -json FILE if asked.
//
//	go run ./examples/faultdomain          # on the GPU if there is one, else simulated
//	go run ./examples/faultdomain -sim     # simulated devices, real shared region
//	go run ./examples/faultdomain -quiet 2s -min-requests 200 -json faultdomain.json
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// childEnv marks the child process; it carries the child's settings.
const childEnv = "FCSP_FAULTDOMAIN_CHILD"

type config struct {
	sim         bool
	region      string
	hold        uint64        // bytes the child holds when it faults
	serve       time.Duration // how long the parent serves after the replacement has served
	quiet       time.Duration // how long the parent serves, measured, before the child faults
	minRequests int           // fewest requests a window's P99 is taken over
}

func main() {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	var cfg config
	flag.BoolVar(&cfg.sim, "sim", false, "simulated devices even where a GPU is present")
	flag.StringVar(&cfg.region, "region", "", "shared region path (default: a fresh file under /dev/shm or the temp dir)")
	hold := flag.Int("hold-mib", 256, "MiB the child holds when it faults")
	flag.DurationVar(&cfg.serve, "serve", 500*time.Millisecond, "how long the parent serves after the replacement has served")
	flag.DurationVar(&cfg.quiet, "quiet", 2*time.Second, "the quiet window: how long the parent serves, measured, beside the idle child before it faults")
	flag.IntVar(&cfg.minRequests, "min-requests", 200, "fewest requests in a window; a shorter one is extended until it holds them")
	jsonPath := flag.String("json", "", "also write the figures to this JSON file")
	flag.Parse()
	if cfg.quiet <= 0 || cfg.minRequests < 1 || *hold < 1 || cfg.serve < 0 {
		fmt.Fprintln(os.Stderr, "faultdomain: want -quiet > 0, -min-requests >= 1, -hold-mib >= 1 and -serve >= 0")
		os.Exit(2)
	}
	cfg.hold = uint64(*hold) << 20
	if cfg.region == "" {
		dir := "/dev/shm"
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			dir = os.TempDir()
		}
		cfg.region = filepath.Join(dir, fmt.Sprintf("fcsp-faultdomain-%d", os.Getpid()))
		defer os.Remove(cfg.region)
	}
	r, err := run(context.Background(), cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultdomain:", err)
		os.Exit(1)
	}
	fmt.Printf("restarted child: served %d checked requests in the same region\n", r.RestartServed)
	r.tables(os.Stdout)
	if *jsonPath != "" {
		if err := writeJSON(*jsonPath, r); err != nil {
			fmt.Fprintln(os.Stderr, "faultdomain:", err)
			os.Exit(1)
		}
	}
	fmt.Printf("PASS: served %d requests (%d during the child's fault and reaping), none failed; shared total healed in %v to exactly this process's %d bytes\n",
		r.Served, r.ServedDuringFault, r.HealedIn.Round(time.Millisecond), r.FinalShared)
}

// result is what the parent saw.
type result struct {
	Simulated         bool
	Served            int    // requests served, all checked
	ServedDuringFault int    // of which between the child's fault and its reaping
	PeakShared        uint64 // shared total while the child held its memory
	ChildFault        string // the child's error, as it printed it
	RestartServed     int    // checked requests the restarted child served
	HealedIn          time.Duration
	FinalShared       uint64 // shared total at the end: this process's usage

	Device      string
	Marks       marks  // from the child's bad launch to the replacement's first request
	MinRequests int    // the fewest requests asked of each window
	Quiet       window // the parent's latency beside the idle child
	Fault       window // and from the bad launch to the replacement serving
	Ratio       float64
}

func open(ctx context.Context, sim bool, region string) (*fcsp.Pool, error) {
	opts := []fcsp.Option{fcsp.WithSharedRegion(region), fcsp.WithHeartbeat(50*time.Millisecond, time.Second)}
	if !sim {
		p, err := fcsp.Open(ctx, 0, opts...)
		if !errors.Is(err, fcsp.ErrNoDriver) {
			return p, err
		}
	}
	return fcsp.Open(ctx, 0, append(opts, fcsptest.SimulatedH200())...)
}

// server is one tenant serving requests: each allocates a buffer, runs the
// chain kernel into it, checks the result and frees it.
type server struct {
	tn *fcsp.Tenant
	fn *fcsp.Function
}

func newServer(p *fcsp.Pool, name string) (*server, error) {
	tn, err := p.NewTenant(name, fcsp.WithSMs(16), fcsp.WithMemoryQuota(1<<30))
	if err != nil {
		return nil, err
	}
	mod, err := tn.LoadModule(kernels.ChainPTX)
	if err != nil {
		return nil, errors.Join(err, tn.Close())
	}
	fn, err := mod.Function("chain")
	if err != nil {
		return nil, errors.Join(err, tn.Close())
	}
	return &server{tn: tn, fn: fn}, nil
}

const reqElems, reqSteps = 4096, 16

func (s *server) request(ctx context.Context) error {
	buf, err := s.tn.Alloc(ctx, 4*reqElems)
	if err != nil {
		return err
	}
	err = launch(ctx, s.tn, s.fn, buf)
	if err == nil {
		err = s.tn.Stream().Synchronize()
	}
	if err == nil {
		out := make([]byte, 4*reqElems)
		if err = s.tn.CopyFromDevice(out, buf); err == nil {
			err = kernels.CheckChain(out, reqSteps)
		}
	}
	return errors.Join(err, s.tn.Free(buf))
}

func launch(ctx context.Context, tn *fcsp.Tenant, fn *fcsp.Function, out fcsp.DevicePtr) error {
	var a fcsp.Args
	a.Ptr(out).Int32(reqElems).Int32(reqSteps)
	return tn.Stream().Launch(ctx, fn, fcsp.Dim3{X: reqElems / 256, Y: 1, Z: 1}, fcsp.Dim3{X: 256, Y: 1, Z: 1}, 0, &a)
}

func run(ctx context.Context, cfg config, log *os.File) (result, error) {
	var r result
	p, err := open(ctx, cfg.sim, cfg.region)
	if err != nil {
		return r, err
	}
	defer p.Close()
	r.Simulated, r.Device, r.MinRequests = p.Device().Simulated, p.Device().String(), cfg.minRequests
	fmt.Fprintf(log, "parent %d: %s; shared region %s\n", os.Getpid(), p.Device(), cfg.region)
	srv, err := newServer(p, "interactive")
	if err != nil {
		return r, err
	}
	defer srv.tn.Close()

	// Serve from the start to the end; any failure fails the run.
	var served, during atomic.Int64
	var faulted, reaped atomic.Bool
	var rec recorder
	stop := make(chan struct{})
	serveErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				serveErr <- nil
				return
			default:
			}
			start := time.Now()
			if err := srv.request(ctx); err != nil {
				serveErr <- fmt.Errorf("request %d: %w", served.Load()+1, err)
				return
			}
			rec.add(start, time.Since(start))
			served.Add(1)
			if faulted.Load() && !reaped.Load() {
				during.Add(1)
			}
		}
	}()
	finish := func(err error) (result, error) {
		close(stop)
		wg.Wait()
		if e := <-serveErr; e != nil {
			err = errors.Join(err, fmt.Errorf("the parent failed to serve: %w", e))
		}
		r.Served, r.ServedDuringFault = int(served.Load()), int(during.Load())
		return r, err
	}

	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join([]string{cfg.region, strconv.FormatBool(r.Simulated), strconv.FormatUint(cfg.hold, 10), "fault"}, ","))
	cmd.Stderr = log
	out, err := cmd.StdoutPipe()
	if err != nil {
		return finish(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return finish(err)
	}
	if err := cmd.Start(); err != nil {
		return finish(err)
	}
	defer stdin.Close()
	kill := func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait() }
	lines := bufio.NewScanner(out)
	expect := func(prefix string) (string, error) {
		for lines.Scan() {
			fmt.Fprintf(log, "  child %d: %s\n", cmd.Process.Pid, lines.Text())
			if rest, ok := strings.CutPrefix(lines.Text(), prefix); ok {
				return rest, nil
			}
		}
		return "", fmt.Errorf("the child ended before saying %q", prefix)
	}
	if _, err := expect("holding "); err != nil {
		kill()
		return finish(err)
	}
	r.PeakShared = p.MemoryUsed()
	fmt.Fprintf(log, "parent: shared total with the child holding its memory: %d bytes (this process: %d)\n", r.PeakShared, p.Stats().MemoryOwn)
	if r.PeakShared < cfg.hold {
		kill()
		return finish(fmt.Errorf("shared total %d bytes while the child holds %d", r.PeakShared, cfg.hold))
	}
	// The quiet window: the parent serves beside the child, which holds
	// its memory and does nothing, until the window holds enough requests.
	quietFrom := time.Now().UnixNano()
	time.Sleep(cfg.quiet)
	quietLonger, err := waitFor(&rec, quietFrom, cfg.minRequests)
	if err != nil {
		kill()
		return finish(err)
	}
	quietTo := time.Now().UnixNano()
	_, _ = stdin.Write([]byte("go\n")) // the parent has looked: fault
	at, err := expect("faulted ")
	if err == nil {
		var v []int64
		if v, err = parseInts(at, 2); err == nil {
			r.Marks.Learned = time.Now().UnixNano()
			r.Marks.Launch, r.Marks.Seen = v[0], v[1]
		}
	}
	if err != nil {
		kill()
		return finish(err)
	}
	faulted.Store(true)
	if r.ChildFault, err = expect("fault: "); err != nil {
		kill()
		return finish(err)
	}
	if !strings.Contains(r.ChildFault, "device lost") {
		kill()
		return finish(fmt.Errorf("the child's fault was not a lost device: %s", r.ChildFault))
	}
	// The poisoned child is killed: it never frees, never leaves the region.
	kill()
	killed := time.Now()
	r.Marks.Killed = killed.UnixNano()
	// Polled often, so that the step's figure is the reaper's, not the
	// poll's (the reaper runs with each heartbeat: open's 50 ms).
	for p.MemoryUsed() >= cfg.hold {
		if time.Since(killed) > 10*time.Second {
			return finish(fmt.Errorf("the child's %d bytes were not reaped in 10 s (shared total %d)", cfg.hold, p.MemoryUsed()))
		}
		time.Sleep(time.Millisecond)
	}
	r.HealedIn = time.Since(killed)
	r.Marks.Reaped = time.Now().UnixNano()
	reaped.Store(true)
	fmt.Fprintf(log, "parent: child killed with SIGKILL, reaped in %v; shared total %d bytes\n", r.HealedIn.Round(time.Millisecond), p.MemoryUsed())
	// The way back for the faulted class is a new process.
	if r.RestartServed, err = restartChild(cfg, r.Simulated, p, log, &r.Marks); err != nil {
		return finish(fmt.Errorf("the restarted child: %w", err))
	}
	// Serve on until the fault window, extended if need be, can hold
	// enough requests.
	if _, err := waitFor(&rec, r.Marks.Launch, cfg.minRequests); err != nil {
		return finish(err)
	}
	time.Sleep(cfg.serve)
	r, err = finish(nil)
	if err != nil {
		return r, err
	}
	samples := rec.all()
	r.Quiet = measure("quiet", samples, quietFrom, quietTo, cfg.minRequests)
	r.Quiet.Asked, r.Quiet.Extended = quietFrom+int64(cfg.quiet), quietLonger
	r.Fault = measure("fault", samples, r.Marks.Launch, r.Marks.First, cfg.minRequests)
	if r.Quiet.P99 > 0 {
		r.Ratio = float64(r.Fault.P99) / float64(r.Quiet.P99)
	}
	r.FinalShared = p.MemoryUsed()
	// The shared total counts every process; MemoryOwn is this process's
	// part: what its tenants' pools map (whole chunks, which hold what
	// they allocated and cached).
	if own := p.Stats().MemoryOwn; r.FinalShared != own {
		return r, fmt.Errorf("shared total %d bytes, this process holds %d: the accounting did not heal exactly", r.FinalShared, own)
	}
	if h := p.Health(); !h.Healthy() {
		return r, fmt.Errorf("the parent's pool is lost: %v", h.Lost)
	}
	fmt.Fprintf(log, "parent: %d requests served, %d of them between the child's fault and its reaping\n", r.Served, r.ServedDuringFault)
	return r, nil
}

// waitFor waits until at least n requests have ended since from, and says
// whether it had to wait.
func waitFor(rec *recorder, from int64, n int) (waited bool, err error) {
	const limit = 30 * time.Second
	for t := time.Now(); rec.countSince(from) < n; time.Sleep(time.Millisecond) {
		if time.Since(t) > limit {
			return true, fmt.Errorf("the parent served only %d requests in %v; want %d (-min-requests)", rec.countSince(from), limit, n)
		}
		waited = true
	}
	return waited, nil
}

// restartChild starts a new child process in place of the faulted one: it
// joins the region, serves a first checked request at once, holds cfg.hold
// bytes (the parent checks the shared total sees them), serves more and
// exits cleanly. It returns how many requests the child served and marks
// when it started, ran, opened its pool, loaded its module and served its
// first request.
func restartChild(cfg config, sim bool, p *fcsp.Pool, log *os.File, m *marks) (int, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join([]string{cfg.region, strconv.FormatBool(sim), strconv.FormatUint(cfg.hold, 10), "restart"}, ","))
	cmd.Stderr = log
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	m.Started = time.Now().UnixNano()
	defer stdin.Close()
	lines := bufio.NewScanner(out)
	served := -1
	for lines.Scan() {
		fmt.Fprintf(log, "  restarted child %d: %s\n", cmd.Process.Pid, lines.Text())
		for _, x := range []struct {
			prefix string
			t      *int64
		}{{"running ", &m.Running}, {"open ", &m.Open}, {"ready ", &m.Ready}, {"first ", &m.First}} {
			if rest, ok := strings.CutPrefix(lines.Text(), x.prefix); ok {
				v, err := parseInts(rest, 1)
				if err != nil {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
					return 0, err
				}
				*x.t = v[0]
			}
		}
		if strings.HasPrefix(lines.Text(), "holding ") {
			if used := p.MemoryUsed(); used < cfg.hold {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				return 0, fmt.Errorf("shared total %d bytes while it holds %d", used, cfg.hold)
			}
			fmt.Fprintf(log, "parent: shared total with the restarted child holding its memory: %d bytes\n", p.MemoryUsed())
			_, _ = stdin.Write([]byte("go\n")) // the parent has looked: serve
		}
		if rest, ok := strings.CutPrefix(lines.Text(), "served "); ok {
			served, _ = strconv.Atoi(rest)
		}
	}
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("exited: %w", err)
	}
	if served <= 0 {
		return 0, errors.New("served no request")
	}
	if m.Running == 0 || m.Open == 0 || m.Ready == 0 || m.First == 0 {
		return 0, errors.New("exited without saying when it ran, opened its pool, loaded its module and served")
	}
	return served, nil
}

// restartMain is the restarted child: a fresh process, so a fresh driver
// state; it joins the region, serves a first checked request as soon as it
// can (saying when each step of that was done), holds memory until the
// parent has seen it, serves more checked requests, gives everything back
// and exits 0.
func restartMain(sim bool, region string, hold uint64) int {
	fmt.Printf("running %d\n", time.Now().UnixNano())
	ctx := context.Background()
	p, err := open(ctx, sim, region)
	if err != nil {
		fmt.Fprintln(os.Stderr, "restarted child:", err)
		return 1
	}
	defer p.Close()
	fmt.Printf("open %d\n", time.Now().UnixNano())
	srv, err := newServer(p, "batch")
	if err != nil {
		fmt.Fprintln(os.Stderr, "restarted child:", err)
		return 1
	}
	defer srv.tn.Close()
	fmt.Printf("ready %d\n", time.Now().UnixNano())
	if err := srv.request(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "restarted child: request 1: %v\n", err)
		return 1
	}
	fmt.Printf("first %d\n", time.Now().UnixNano())
	buf, err := srv.tn.Alloc(ctx, hold)
	if err != nil {
		fmt.Fprintln(os.Stderr, "restarted child:", err)
		return 1
	}
	fmt.Printf("holding %d bytes\n", hold)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent has checked
	const n = 8
	for i := 1; i < n; i++ {
		if err := srv.request(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "restarted child: request %d: %v\n", i+1, err)
			return 1
		}
	}
	if err := srv.tn.Free(buf); err != nil {
		fmt.Fprintln(os.Stderr, "restarted child:", err)
		return 1
	}
	fmt.Printf("served %d\n", n)
	return 0
}

// childMain holds memory in the shared region, faults its device and says
// so, then waits to be killed (or, restarted, serves: restartMain).
func childMain() int {
	parts := strings.Split(os.Getenv(childEnv), ",")
	if len(parts) != 4 {
		fmt.Fprintln(os.Stderr, "child: bad", childEnv)
		return 2
	}
	if parts[3] == "restart" {
		sim, _ := strconv.ParseBool(parts[1])
		hold, _ := strconv.ParseUint(parts[2], 10, 64)
		return restartMain(sim, parts[0], hold)
	}
	sim, _ := strconv.ParseBool(parts[1])
	hold, _ := strconv.ParseUint(parts[2], 10, 64)
	ctx := context.Background()
	p, err := open(ctx, sim, parts[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	srv, err := newServer(p, "batch")
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	if _, err := srv.tn.Alloc(ctx, hold); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	fmt.Printf("holding %d bytes\n", hold)
	// The parent looks at the shared total before the fault, so that it
	// reads the child's usage before anything of the fault can change it.
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	// A request with a bad pointer: the chain kernel writes to 0x10.
	launched := time.Now().UnixNano()
	err = launch(ctx, srv.tn, srv.fn, 0x10)
	if err == nil {
		err = srv.tn.Stream().Synchronize()
	}
	fmt.Printf("faulted %d %d\n", launched, time.Now().UnixNano())
	fmt.Printf("fault: %v\n", err)
	_, err = srv.tn.Alloc(ctx, 1)
	fmt.Printf("next allocation: %v\n", err)
	fmt.Printf("restart required: %v\n", p.Health().RestartRequired)
	time.Sleep(time.Minute) // killed by the parent long before
	return 3
}
