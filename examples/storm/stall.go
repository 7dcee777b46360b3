package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The stall: a tenant whose kernel never ends (spin(kernels.SpinForever),
// centuries of SM clock cycles) beside the two classes, and what the
// server and the classes beside it see. Two variants, interleaved in each
// round:
//
//	sdk  one server process (this program, -stall-role server): the
//	     interactive class on -inter-sms SMs, a "stuck" tenant on
//	     -stall-sms, the batch class on the rest, the pool opened
//	     WithStallTimeout(-stall-bound) and WithStallHandler (the classes
//	     with their own bound, -stall-class-bound, where given). Both
//	     classes serve (and race a server's calls, -stall-storm) for
//	     -warmup, then a measured window (the first duration), then the
//	     stuck tenant launches the kernel that never ends and a second
//	     window of the second duration is measured. The server times the
//	     launch, the handler's call (and the watchdog's finding), Health's
//	     report, the stuck tenant's next calls (ErrStalled), then drains
//	     its classes and calls Pool.Shutdown with a -stall-shutdown
//	     deadline, prints what it saw and exits. This process times the
//	     exit and starts a replacement (-stall-role replace) that opens its
//	     pool, makes its interactive tenant and serves its first request,
//	     step by step, as examples/faultdomain times the way back from a
//	     fault.
//	mps  the same under NVIDIA MPS (the daemon started by -mps-start): three
//	     processes on the plain device, the interactive class and a spinning
//	     client at -mps-inter-pct, the batch class at -mps-batch-pct. The
//	     spinning client launches the same kernel after the first window;
//	     after the second it is killed with SIGKILL mid-kernel, a new
//	     client is started in its place, and the two classes go on being
//	     measured for a third window as long as the second: what a killed
//	     client does to its neighbours and to the MPS server, recorded
//	     (-mps-query lists the servers before and after), not assumed.
//
// The must-show (sdk): the interactive P99 and the batch throughput during
// the stall within 1.1x of the figures before it; the stall reported
// within the bound plus 10 ms; the stuck tenant's next calls ErrStalled
// within 1 ms; Pool.Shutdown returning within 1.1x its deadline, naming
// the stalled tenant; the exit and the replacement serving.
//
//	storm -stall 2s/2s -stall-bound 200ms [-stall-variants sdk,mps] [-rounds 3]

var stallVariants = []string{"sdk", "mps"}

// stallRoles are the processes of the stall mode.
var stallRoles = []string{"server", "interactive", "batch", "spin", "replace"}

// stuckName is the sdk server's tenant whose kernel never ends.
const stuckName = "stuck"

// ErrStallCheck is a stall run whose functional checks failed: the stall
// not reported or not named, the stuck tenant's calls not refused,
// Shutdown not naming it, a neighbour's call failing, no replacement.
var ErrStallCheck = errors.New("a functional check of the stall failed")

type stallCfg struct {
	before, during time.Duration
	bound          time.Duration
	classBound     time.Duration // the classes' own (WithTenantStallTimeout); 0: the pool's
	variants       []string
	k              int           // interactive request goroutines
	sms            int           // the stuck tenant's SMs (sdk)
	shutdown       time.Duration // Pool.Shutdown's deadline
	storm          string        // the racing calls: none, all, or kinds, comma-separated
	stormG         int
	pace           time.Duration
	role           string
	mpsQuery       string

	// as given, read by parse
	spec, variantsSpec string
}

func (s *stallCfg) register(fs *flag.FlagSet) {
	fs.StringVar(&s.spec, "stall", "", "before/during durations (e.g. 2s/2s): run a tenant whose kernel never ends beside the two classes (the figures before it against those during it), its report, its refused calls, Shutdown, the exit and a replacement, in the -stall-variants, instead of the storm matrix")
	fs.DurationVar(&s.bound, "stall-bound", 200*time.Millisecond, "-stall: the pool's fcsp.WithStallTimeout (every process's)")
	fs.DurationVar(&s.classBound, "stall-class-bound", 0, "-stall: the interactive and batch classes' own bound (fcsp.WithTenantStallTimeout; under MPS their processes' pool bound); 0: -stall-bound. On the simulator, whose kernels are the host's CPU work, a loaded host makes them last seconds")
	fs.StringVar(&s.variantsSpec, "stall-variants", strings.Join(stallVariants, ","), "-stall: variants, comma-separated: sdk (one server process, the stuck tenant partitioned beside the classes), mps (a process per class under MPS at -mps-inter-pct / -mps-batch-pct, the spinning client SIGKILLed after)")
	fs.IntVar(&s.k, "stall-k", 4, "-stall: interactive request goroutines")
	fs.IntVar(&s.sms, "stall-sms", 16, "-stall: the stuck tenant's SMs (sdk)")
	fs.DurationVar(&s.shutdown, "stall-shutdown", time.Second, "-stall: Pool.Shutdown's deadline after the stall (sdk)")
	fs.StringVar(&s.storm, "stall-storm", stormAll, "-stall: a server's calls racing the requests on each class's tenant: none, all, or some of "+strings.Join(stormKinds, ", ")+", comma-separated")
	fs.IntVar(&s.stormG, "stall-storm-g", 2, "-stall: racing goroutines per class per storm kind")
	fs.DurationVar(&s.pace, "stall-pace", time.Millisecond, "-stall: each racing goroutine makes one call per this period")
	fs.StringVar(&s.mpsQuery, "mps-query", "echo get_server_list | nvidia-cuda-mps-control", "-stall's mps variant: shell command whose output (the MPS servers) is recorded before and after the spinning client's SIGKILL (empty: none)")
	fs.StringVar(&s.role, "stall-role", "", "internal to -stall: run one process of it ("+strings.Join(stallRoles, ", ")+")")
}

func (s *stallCfg) parse() error {
	if s.role != "" && !slices.Contains(stallRoles, s.role) {
		return fmt.Errorf("%w: -stall-role %q: want one of %s", ErrUnknown, s.role, strings.Join(stallRoles, ", "))
	}
	if s.spec == "" {
		if s.role != "" {
			return fmt.Errorf("%w: -stall-role %s without -stall", ErrBadValue, s.role)
		}
		return nil
	}
	var err error
	if s.before, s.during, err = parsePair("stall", s.spec, "2s/2s"); err != nil {
		return err
	}
	if s.variants, err = parseNames("stall-variants", s.variantsSpec, stallVariants); err != nil {
		return err
	}
	if _, err := s.stormKinds(); err != nil {
		return err
	}
	switch {
	case s.bound <= 0 || s.classBound < 0:
		return fmt.Errorf("%w: -stall-bound %v, -stall-class-bound %v: want more than 0, and 0 (the pool's) or more", ErrBadValue, s.bound, s.classBound)
	case s.k < 1 || s.sms < 1 || s.stormG < 0:
		return fmt.Errorf("%w: -stall-k %d, -stall-sms %d, -stall-storm-g %d: want at least 1, 1 and 0", ErrBadValue, s.k, s.sms, s.stormG)
	case s.shutdown <= 0 || s.pace <= 0:
		return fmt.Errorf("%w: -stall-shutdown %v, -stall-pace %v: want more than 0", ErrBadValue, s.shutdown, s.pace)
	}
	return nil
}

// stormKinds is -stall-storm's kinds.
func (s stallCfg) stormKinds() ([]string, error) {
	if s.storm == stormNone || s.storm == stormAll {
		return kindsOf(s.storm), nil
	}
	return parseNames("stall-storm", s.storm, stormKinds)
}

// stallArgs are a stall process's arguments: this run's settings, one
// variant.
func (c config) stallArgs(role, variant string) []string {
	s := c.stall
	a := []string{"-stall-role", role, "-stall", s.before.String() + "/" + s.during.String(), "-stall-bound", s.bound.String(),
		"-stall-class-bound", s.classBound.String(), "-stall-variants", variant, "-stall-k", strconv.Itoa(s.k), "-stall-sms", strconv.Itoa(s.sms), "-stall-shutdown", s.shutdown.String(),
		"-stall-storm", s.storm, "-stall-storm-g", strconv.Itoa(s.stormG), "-stall-pace", s.pace.String(),
		"-batch-k", strconv.Itoa(c.batchK), "-inter-sms", strconv.Itoa(c.interSMs), "-warmup", c.warmup.String(),
		"-wait", c.wait, "-heap", strconv.Itoa(c.heapMiB), "-maxconn=false", "-probe-every", "0"}
	if c.cublas != "" {
		a = append(a, "-cublas", c.cublas)
	}
	if c.simulate {
		a = append(a, "-simulate")
	}
	if c.logMoves {
		a = append(a, "-log-moves")
	}
	return a
}

// StallReport is the stall mode's JSON: every round's rows and the checks.
type StallReport struct {
	BoundMs    float64    `json:"bound_ms"`
	BeforeS    float64    `json:"before_s"`
	DuringS    float64    `json:"during_s"`
	ShutdownMs float64    `json:"shutdown_deadline_ms"`
	Rows       []StallRow `json:"rows"`
	Checks     []Check    `json:"checks"`
	Judged     []bool     `json:"judged"` // per check: false where the simulator's timings cannot judge it
}

// StallRow is one variant in one round.
type StallRow struct {
	Round     int     `json:"round"`
	Variant   string  `json:"variant"`
	Work      string  `json:"work"`
	Simulated bool    `json:"simulated,omitempty"`
	Device    string  `json:"device,omitempty"`
	BoundMs   float64 `json:"bound_ms"`
	// sdk: each tenant's SMs; mps: the clients' active-thread percentages.
	InterSMs int `json:"interactive_sms,omitempty"`
	StuckSMs int `json:"stuck_sms,omitempty"`
	BatchSMs int `json:"batch_sms,omitempty"`
	InterPct int `json:"mps_interactive_and_spin_pct,omitempty"`
	BatchPct int `json:"mps_batch_pct,omitempty"`

	Before StallWindow  `json:"before"`
	During StallWindow  `json:"during"`
	After  *StallWindow `json:"after_kill,omitempty"` // mps: after the spinning client's SIGKILL
	// Ratios, during / before (and after / before under MPS).
	P99Ratio        float64 `json:"p99_during_to_before"`
	BatchRatio      float64 `json:"batch_during_to_before"`
	AfterP99Ratio   float64 `json:"p99_after_to_before,omitempty"`
	AfterBatchRatio float64 `json:"batch_after_to_before,omitempty"`

	// The kernel that never ends: its launch, and the stall as its
	// process's watchdog reported it (nil: never).
	LaunchNs   int64      `json:"launch_unix_ns"`
	LaunchUs   float64    `json:"launch_us"`
	LaunchErr  string     `json:"launch_error,omitempty"`
	Stall      *StallSeen `json:"stall,omitempty"`
	ReportedMs float64    `json:"reported_ms"` // the handler's call after the launch; -1: never
	FoundMs    float64    `json:"found_ms"`    // the watchdog's finding after the launch
	Next       []NextCall `json:"next_calls,omitempty"`
	// OtherStalls are stalls reported of any other tenant or process: none
	// is expected (a false positive, or under MPS a neighbour stuck too).
	OtherStalls []string `json:"other_stalls,omitempty"`
	Warned      bool     `json:"warning_logged"` // the SDK's warning line, in the spinning process's stderr

	// sdk: Pool.Shutdown after the second window.
	ShutdownStartNs int64   `json:"shutdown_start_unix_ns,omitempty"`
	ShutdownEndNs   int64   `json:"shutdown_end_unix_ns,omitempty"`
	ShutdownMs      float64 `json:"shutdown_ms,omitempty"`
	ShutdownErr     string  `json:"shutdown_error,omitempty"`
	ShutdownStalled bool    `json:"shutdown_is_err_stalled,omitempty"`
	ShutdownNamed   bool    `json:"shutdown_names_tenant,omitempty"`
	DrainMs         float64 `json:"drain_ms,omitempty"`   // sdk: the classes closed before Shutdown
	DrainLeft       string  `json:"drain_left,omitempty"` // where the drain waited, if past the Shutdown bound

	// The process that held the stuck kernel: from its last word (sdk:
	// "exiting"; mps: the SIGKILL) to its exit, as waited for here.
	EndNs    int64   `json:"end_unix_ns"` // sdk: the server's "exiting" mark; mps: the SIGKILL
	ExitedNs int64   `json:"exited_unix_ns"`
	ExitMs   float64 `json:"exit_ms"`
	Killed   bool    `json:"killed"` // mps: always; sdk: only if it did not exit by itself
	ExitErr  string  `json:"exit_error,omitempty"`

	Replace    replaceMarks `json:"replacement_unix_ns"`
	ReplaceErr string       `json:"replacement_error,omitempty"`

	NeighbourErrors int       `json:"neighbour_failed_calls"`
	NeighbourError  string    `json:"neighbour_first_error,omitempty"`
	Hung            []string  `json:"hung,omitempty"` // measured processes or goroutines that never came back
	StormPerS       float64   `json:"storm_calls_per_s"`
	MPS             *mpsFacts `json:"mps,omitempty"`
}

// mpsFacts is what the MPS daemon showed around the SIGKILL.
type mpsFacts struct {
	ServersStalled  string  `json:"servers_during_stall"`
	ServersKilled   string  `json:"servers_after_kill"`
	ServersReplaced string  `json:"servers_after_new_client"`
	QuitMs          float64 `json:"quit_ms"`
	QuitErr         string  `json:"quit_error,omitempty"`
}

// replaceMarks are the replacement process's moments, UnixNano.
type replaceMarks struct {
	Started int64 `json:"started"` // exec done, here
	Running int64 `json:"running"` // its main entered (the process's start)
	Open    int64 `json:"open"`    // cuBLAS loaded and its pool open
	Ready   int64 `json:"ready"`   // its tenant and worker made
	First   int64 `json:"first"`   // its first interactive request served and checked
}

// readyWait bounds a process's start (a pool, cuBLAS, the classes' warm-up).
const readyWait = 2 * time.Minute

// runStall runs every variant in every round and reports.
func runStall(ctx context.Context, cfg config, out, errw io.Writer) (*StallReport, error) {
	sc := cfg.stall
	fmt.Fprintf(out, "storm -stall: a tenant's kernel that never ends beside the interactive class (%d request goroutines) and the batch class (%d), a server's calls racing them (%s, %d goroutines per class per kind, one call per %v), bound %v, %v before / %v during, variants %s, %d round(s)\n",
		sc.k, max(cfg.batchK, 2), sc.storm, sc.stormG, sc.pace, sc.bound, sc.before, sc.during, strings.Join(sc.variants, ","), cfg.rounds)
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	rep := &StallReport{BoundMs: ms(sc.bound), BeforeS: sc.before.Seconds(), DuringS: sc.during.Seconds(), ShutdownMs: ms(sc.shutdown)}
	for round := 1; round <= cfg.rounds; round++ {
		for _, v := range sc.variants {
			var r StallRow
			if v == "sdk" {
				r, err = stallSDK(ctx, exe, cfg, errw)
			} else {
				r, err = stallMPS(ctx, exe, cfg, errw)
			}
			r.Round, r.Variant, r.BoundMs = round, v, ms(sc.bound)
			if err != nil { // what was measured so far, then why it stopped
				rep.finish(sc)
				rep.write(out, sc)
				return rep, fmt.Errorf("round %d, %s: %w", round, v, err)
			}
			r.ratios()
			fmt.Fprintln(out, r)
			rep.Rows = append(rep.Rows, r)
		}
	}
	rep.finish(sc)
	rep.write(out, sc)
	for i, c := range rep.Checks {
		if !c.Pass && !timingCheck(c.Name) && rep.Judged[i] {
			return rep, fmt.Errorf("%w: %s: %s", ErrStallCheck, c.Name, c.Got)
		}
	}
	return rep, nil
}

func nsMs(from, to int64) float64 { return float64(to-from) / 1e6 }

// stallSDK is the sdk variant: the server process, its exit, and its
// replacement.
func stallSDK(ctx context.Context, exe string, cfg config, errw io.Writer) (row StallRow, err error) {
	sc := cfg.stall
	srv, err := startProc(ctx, exe, "server", cfg.stallArgs("server", "sdk"))
	if err != nil {
		return row, err
	}
	defer srv.dump(errw)
	defer srv.stop()
	if _, err := srv.expect("ready", readyWait); err != nil {
		return row, err
	}
	line, err := srv.expect("result ", cfg.warmup+sc.before+sc.during+sc.shutdown+30*time.Second)
	if err != nil {
		// Where it waits, from its goroutines' stacks.
		fmt.Fprintf(errw, "== the server process's stacks (SIGQUIT after: %v):\n%s\n== end of the server process's stacks\n", err, srv.quit(5*time.Second))
		return row, err
	}
	var res stallResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		return row, fmt.Errorf("server's result: %w", err)
	}
	row.fromSpinner(res)
	row.Work, row.Simulated, row.Device = res.Work, res.Simulated, res.Device
	row.InterSMs, row.StuckSMs, row.BatchSMs = res.InterSMs, res.StuckSMs, res.BatchSMs
	row.Before, row.During = res.Windows[0], res.Windows[1]
	row.NeighbourErrors, row.NeighbourError, row.Hung, row.StormPerS = res.Errors, res.FirstError, res.Hung, res.StormPerS
	row.ShutdownStartNs, row.ShutdownEndNs, row.ShutdownErr = res.ShutdownStartNs, res.ShutdownEndNs, res.ShutdownErr
	row.ShutdownMs = nsMs(res.ShutdownStartNs, res.ShutdownEndNs)
	row.ShutdownStalled, row.ShutdownNamed = res.ShutdownStalled, res.ShutdownNamed
	row.DrainMs, row.DrainLeft = res.DrainMs, res.DrainLeft
	end, err := srv.expect("exiting ", 10*time.Second)
	if err == nil {
		row.EndNs, err = strconv.ParseInt(strings.TrimSpace(end), 10, 64)
	}
	if err != nil {
		return row, err
	}
	// The exit: by itself, or killed after 30 s.
	if !srv.waitExit(30 * time.Second) {
		row.Killed = true
		srv.kill()
		if !srv.waitExit(10 * time.Second) {
			return row, errors.New("the server did not exit 10 s after SIGKILL")
		}
	}
	row.ExitedNs, row.ExitMs = srv.exitAt.UnixNano(), nsMs(row.EndNs, srv.exitAt.UnixNano())
	if srv.err != nil {
		row.ExitErr = srv.err.Error()
	}
	row.Warned = strings.Contains(srv.stderr.String(), "tenant stalled")
	row.Replace, err = stallReplace(ctx, exe, cfg, "sdk", errw)
	if err != nil {
		row.ReplaceErr = err.Error()
	}
	return row, nil
}

// fromSpinner takes what the process holding the stuck kernel saw of it.
func (r *StallRow) fromSpinner(res stallResult) {
	r.LaunchNs, r.LaunchUs, r.LaunchErr = res.LaunchNs, res.LaunchUs, res.LaunchErr
	r.Stall, r.Next, r.OtherStalls = res.Stall, res.Next, append(r.OtherStalls, res.OtherStalls...)
	r.ReportedMs, r.FoundMs = -1, -1
	if s := res.Stall; s != nil {
		r.ReportedMs, r.FoundMs = nsMs(res.LaunchNs, s.HandledNs), nsMs(res.LaunchNs, s.FoundNs)
	}
}

// stallReplace starts the replacement process and reads its marks.
func stallReplace(ctx context.Context, exe string, cfg config, variant string, errw io.Writer, env ...string) (m replaceMarks, err error) {
	p, err := startProc(ctx, exe, "replace", cfg.stallArgs("replace", variant), env...)
	if err != nil {
		return m, err
	}
	m.Started = time.Now().UnixNano()
	defer p.dump(errw)
	defer p.stop()
	for _, x := range []struct {
		prefix string
		t      *int64
	}{{"running ", &m.Running}, {"open ", &m.Open}, {"ready ", &m.Ready}, {"first ", &m.First}} {
		rest, err := p.expect(x.prefix, 30*time.Second)
		if err == nil {
			*x.t, err = strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		}
		if err != nil {
			return m, err
		}
	}
	if !p.waitExit(30 * time.Second) {
		return m, errors.New("the replacement served but did not exit within 30 s")
	}
	if p.err != nil {
		return m, fmt.Errorf("the replacement exited: %w: %s", p.err, tail(p.stderr.String(), 4))
	}
	return m, nil
}

// stallMPS is the mps variant: the daemon, the three clients, the
// SIGKILL, a new client, the window after.
func stallMPS(ctx context.Context, exe string, cfg config, errw io.Writer) (row StallRow, err error) {
	sc := cfg.stall
	row.InterPct, row.BatchPct = cfg.mpsInter, cfg.mpsBatch
	facts := &mpsFacts{}
	row.MPS = facts
	if err := shell(ctx, cfg.mpsStart); err != nil {
		return row, fmt.Errorf("starting the MPS daemon: %w", err)
	}
	if cfg.mpsStart != "" {
		time.Sleep(time.Second) // as startMPS: the daemon is up
	}
	var kids []*stallProc
	defer func() {
		for _, k := range kids { // on an error, nobody is left running
			k.stop()
			k.dump(errw)
		}
		// Quit the daemon, bounded: a wedged one is a finding, not a hang.
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		t := time.Now()
		if e := shell(qctx, cfg.mpsStop); e != nil {
			facts.QuitErr = e.Error()
		}
		facts.QuitMs = ms(time.Since(t))
		if cfg.mpsStop != "" {
			time.Sleep(time.Second) // the daemon's exit, before the next variant opens the device
		}
	}()
	pct := func(p int) string { return "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=" + strconv.Itoa(p) }
	for _, x := range []struct {
		role string
		pct  int
	}{{"batch", cfg.mpsBatch}, {"interactive", cfg.mpsInter}, {"spin", cfg.mpsInter}} {
		p, err := startProc(ctx, exe, x.role, cfg.stallArgs(x.role, "mps"), pct(x.pct))
		if err != nil {
			return row, err
		}
		kids = append(kids, p)
	}
	batch, inter, spin := kids[0], kids[1], kids[2]
	for _, k := range kids {
		if _, err := k.expect("ready", readyWait); err != nil {
			return row, err
		}
	}
	time.Sleep(cfg.warmup)
	t0 := time.Now().UnixNano()
	time.Sleep(sc.before)
	fmt.Fprintln(spin.stdin, "spin")
	line, err := spin.expect("launched ", 10*time.Second)
	var launch int64
	if err == nil {
		launch, err = strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	}
	if err != nil {
		return row, err
	}
	time.Sleep(time.Until(time.Unix(0, launch).Add(sc.during)))
	t2 := time.Now().UnixNano()
	if line, err = spin.expect("result ", 10*time.Second); err != nil {
		return row, err
	}
	var res stallResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		return row, fmt.Errorf("spinning client's result: %w", err)
	}
	row.fromSpinner(res)
	row.Warned = strings.Contains(spin.stderr.String(), "tenant stalled")
	facts.ServersStalled = shellOut(ctx, sc.mpsQuery)
	// SIGKILL mid-kernel, as a supervisor would end a stuck client.
	row.Killed = true
	row.EndNs = spin.kill().UnixNano()
	if !spin.waitExit(30 * time.Second) {
		return row, errors.New("the spinning client did not exit 30 s after SIGKILL")
	}
	row.ExitedNs, row.ExitMs = spin.exitAt.UnixNano(), nsMs(row.EndNs, spin.exitAt.UnixNano())
	facts.ServersKilled = shellOut(ctx, sc.mpsQuery)
	row.Replace, err = stallReplace(ctx, exe, cfg, "mps", errw, pct(cfg.mpsInter))
	if err != nil {
		row.ReplaceErr = err.Error()
	}
	facts.ServersReplaced = shellOut(ctx, sc.mpsQuery)
	t4 := row.EndNs + sc.during.Nanoseconds()
	time.Sleep(time.Until(time.Unix(0, t4)))
	// The measured clients: their windows, then their results; one that
	// never answers is hung (killed, and said so).
	windows := fmt.Sprintf("windows %d %d %d %d %d %d", t0, launch, launch, t2, row.EndNs, t4)
	var results [2]*stallResult
	var wg sync.WaitGroup
	for i, k := range []*stallProc{inter, batch} {
		fmt.Fprintln(k.stdin, windows)
		_ = k.stdin.Close()
		wg.Go(func() {
			line, err := k.expect("result ", 30*time.Second)
			var r stallResult
			if err == nil && json.Unmarshal([]byte(line), &r) == nil {
				results[i] = &r
			}
		})
	}
	wg.Wait()
	for _, k := range []*stallProc{inter, batch} { // they close their pools and exit
		if !k.waitExit(15 * time.Second) {
			row.Hung = append(row.Hung, k.role+" process (no exit 15 s after its result: killed)")
		}
	}
	for i, k := range []*stallProc{inter, batch} {
		r := results[i]
		if r == nil {
			row.Hung = append(row.Hung, k.role+" process (no result in 30 s: killed)")
			continue
		}
		if len(r.Windows) != 3 {
			return row, fmt.Errorf("%s process: %d windows, want 3", k.role, len(r.Windows))
		}
		row.Work, row.Simulated, row.Device = r.Work, r.Simulated, r.Device
		row.NeighbourErrors += r.Errors
		if row.NeighbourError == "" {
			row.NeighbourError = r.FirstError
		}
		row.Hung = append(row.Hung, r.Hung...)
		row.OtherStalls = append(row.OtherStalls, r.OtherStalls...)
		row.StormPerS += r.StormPerS
		after := r.Windows[2]
		if k == inter {
			row.Before, row.During, row.After = r.Windows[0], r.Windows[1], &after
			continue
		}
		for j, w := range []*StallWindow{&row.Before, &row.During, row.After} {
			if w == nil {
				continue
			}
			w.BatchGEMMs, w.BatchTFLOPs = r.Windows[j].BatchGEMMs, r.Windows[j].BatchTFLOPs
			w.Errors += r.Windows[j].Errors
		}
	}
	return row, nil
}

// shellOut is cmd's output, trimmed, one line; an error says so.
func shellOut(ctx context.Context, cmd string) string {
	if cmd == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, "sh", "-c", cmd).CombinedOutput()
	s := strings.Join(strings.Fields(string(b)), " ")
	if err != nil {
		return fmt.Sprintf("(%v) %s", err, s)
	}
	if s == "" {
		return "(none)"
	}
	return s
}

func (r *StallRow) ratios() {
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	r.P99Ratio, r.BatchRatio = div(r.During.P99us, r.Before.P99us), div(r.During.BatchTFLOPs, r.Before.BatchTFLOPs)
	if r.After != nil {
		r.AfterP99Ratio, r.AfterBatchRatio = div(r.After.P99us, r.Before.P99us), div(r.After.BatchTFLOPs, r.Before.BatchTFLOPs)
	}
}

func (r StallRow) String() string {
	s := fmt.Sprintf("round %d %-3s interactive P99 %.0f -> %.0f us (%.2fx), batch %s -> %s TFLOP/s (%.2fx); ",
		r.Round, r.Variant, r.Before.P99us, r.During.P99us, r.P99Ratio, tflops(r.Before.BatchTFLOPs), tflops(r.During.BatchTFLOPs), r.BatchRatio)
	if r.Stall != nil {
		s += fmt.Sprintf("stall reported %.1f ms after the launch (bound %.0f ms), next call %.1f us; ", r.ReportedMs, r.BoundMs, maxNextUs(r.Next))
	} else {
		s += "stall NOT reported; "
	}
	if r.Variant == "sdk" {
		s += fmt.Sprintf("Shutdown %.1f ms, exit %.1f ms", r.ShutdownMs, r.ExitMs)
	} else {
		s += fmt.Sprintf("exit %.1f ms after SIGKILL", r.ExitMs)
	}
	if r.Replace.First > 0 {
		s += fmt.Sprintf(", replacement served %.0f ms after", nsMs(r.replaceFrom(), r.Replace.First))
	} else {
		s += ", no replacement served: " + r.ReplaceErr
	}
	return s + " [" + r.Work + "]"
}

// replaceFrom is where the way back starts: Shutdown called (sdk), the
// SIGKILL (mps).
func (r StallRow) replaceFrom() int64 {
	if r.Variant == "sdk" {
		return r.ShutdownStartNs
	}
	return r.EndNs
}

func maxNextUs(n []NextCall) float64 {
	m := 0.0
	for _, c := range n {
		m = max(m, c.Us)
	}
	return m
}

// steps are the way back, step by step, from Shutdown called (sdk) or the
// SIGKILL (mps) to the replacement's first request; their sum is total.
func (r StallRow) steps() (s []step, total time.Duration) {
	type mark struct {
		name string
		t    int64
	}
	var at []mark
	if r.Variant == "sdk" {
		at = []mark{{"Pool.Shutdown called", r.ShutdownStartNs}, {"Pool.Shutdown returned", r.ShutdownEndNs},
			{"process exited (its last line printed, its exit waited for)", r.ExitedNs}}
	} else {
		at = []mark{{"SIGKILL sent", r.EndNs}, {"client exited (its exit waited for)", r.ExitedNs}}
	}
	at = append(at, mark{"replacement started (fork and exec)", r.Replace.Started}, mark{"replacement running (its process's start)", r.Replace.Running},
		mark{"replacement's cuBLAS loaded and pool open", r.Replace.Open}, mark{"replacement's tenant and worker made", r.Replace.Ready},
		mark{"replacement's first interactive request served", r.Replace.First})
	for i := 1; i < len(at); i++ {
		s = append(s, step{at[i].name, time.Duration(at[i].t - at[i-1].t)})
	}
	return s, time.Duration(at[len(at)-1].t - at[0].t)
}

type step struct {
	Name string
	Dur  time.Duration
}

// timingChecks are the checks a simulator's timings cannot judge.
var timingChecks = []string{"1.1x before", "before / 1.1", "bound + 10 ms", "within 1 ms", "returns within"}

func timingCheck(name string) bool {
	for _, t := range timingChecks {
		if strings.Contains(name, t) {
			return true
		}
	}
	return false
}

// finish judges the sdk rows: the ratios by their median over rounds (the
// spread shown), each bound by its worst round, the functional checks in
// every round.
func (rep *StallReport) finish(sc stallCfg) {
	var sdk []StallRow
	for _, r := range rep.Rows {
		if r.Variant == "sdk" {
			sdk = append(sdk, r)
		}
	}
	if len(sdk) == 0 {
		return
	}
	sim := sdk[0].Simulated
	add := func(ok bool, name, got string) {
		rep.Checks = append(rep.Checks, Check{Name: name, Pass: ok, Got: got})
		rep.Judged = append(rep.Judged, !sim || !timingCheck(name))
	}
	spread := func(f func(StallRow) float64) (med float64, s string) {
		var v []float64
		for _, r := range sdk {
			v = append(v, f(r))
		}
		lo, hi := v[0], v[0]
		for _, x := range v {
			lo, hi = min(lo, x), max(hi, x)
		}
		return median(v), fmt.Sprintf("rounds %.2f-%.2f", lo, hi)
	}
	worst := func(f func(StallRow) float64) float64 {
		w := f(sdk[0])
		for _, r := range sdk {
			w = max(w, f(r))
		}
		return w
	}
	every := func(f func(StallRow) bool) bool {
		for _, r := range sdk {
			if !f(r) {
				return false
			}
		}
		return true
	}
	p99, s := spread(func(r StallRow) float64 { return r.P99Ratio })
	add(p99 > 0 && p99 <= 1.1, "sdk: interactive P99 during the stall <= 1.1x before", fmt.Sprintf("%.2fx (median; %s)", p99, s))
	tf, s := spread(func(r StallRow) float64 { return r.BatchRatio })
	add(tf > 0 && tf >= 1/1.1, "sdk: batch throughput during the stall >= before / 1.1", fmt.Sprintf("%.2fx (median; %s)", tf, s))
	reported := every(func(r StallRow) bool { return r.Stall != nil })
	rw := worst(func(r StallRow) float64 { return r.ReportedMs })
	limit := ms(sc.bound) + 10
	add(reported && rw <= limit, "sdk: stall reported within the bound + 10 ms", fmt.Sprintf("worst %.1f ms after the launch, limit %.0f ms (found by the watchdog: worst %.1f ms)",
		rw, limit, worst(func(r StallRow) float64 { return r.FoundMs })))
	named := every(func(r StallRow) bool {
		st := r.Stall
		return st != nil && st.Tenant == stuckName && st.Kernel == "spin" && st.HealthNames && st.RestartRequired && st.Healthy && st.StatsStalled && r.Warned && len(r.OtherStalls) == 0
	})
	add(named, "sdk: the stall is reported, naming the tenant (handler, Health, Stats, a warning line; no other tenant)", stallSeenText(sdk[0]))
	refused := every(func(r StallRow) bool {
		for _, n := range r.Next {
			if !n.Stalled {
				return false
			}
		}
		return len(r.Next) > 0
	})
	add(refused, "sdk: the stalled tenant's next calls return ErrStalled", nextText(sdk[0].Next))
	nw := worst(func(r StallRow) float64 { return maxNextUs(r.Next) })
	add(refused && nw <= 1000, "sdk: the stalled tenant's next calls return within 1 ms", fmt.Sprintf("worst %.1f us", nw))
	dl := fmt.Sprintf("sdk: Pool.Shutdown(%v)", sc.shutdown)
	// Named: its name and "stalled" in the error (ErrStalled itself where
	// the close ended before the deadline, ctx's error naming it where not).
	add(every(func(r StallRow) bool { return r.ShutdownNamed && strings.Contains(r.ShutdownErr, "stalled") }), dl+" names the stalled tenant",
		fmt.Sprintf("errors.Is(err, ErrStalled) %v: %q", sdk[0].ShutdownStalled, sdk[0].ShutdownErr))
	sw := worst(func(r StallRow) float64 { return r.ShutdownMs })
	add(sw > 0 && sw <= 1.1*ms(sc.shutdown), fmt.Sprintf("%s returns within %.1f s", dl, 1.1*sc.shutdown.Seconds()), fmt.Sprintf("worst %.1f ms", sw))
	n := 0
	for _, r := range sdk {
		n += r.NeighbourErrors + len(r.Hung)
	}
	add(n == 0, "sdk: the neighbours' calls never failed", fmt.Sprintf("%d failed or hung%s", n, firstNonEmpty(sdk, func(r StallRow) string {
		return strings.TrimSpace(r.NeighbourError + " " + strings.Join(r.Hung, "; "))
	})))
	// Reported, not judged: the drain is the server's code and its
	// libraries', some of whose calls wait for the whole device.
	dw := worst(func(r StallRow) float64 { return r.DrainMs })
	rep.Checks = append(rep.Checks, Check{Name: "sdk: the server's drain (its classes' handles and buffers closed) returned within the Shutdown bound", Pass: every(func(r StallRow) bool { return r.DrainLeft == "" }),
		Got: fmt.Sprintf("worst %.1f ms%s", dw, firstNonEmpty(sdk, func(r StallRow) string { return firstLine(r.DrainLeft, "main.(*class).close") }))})
	rep.Judged = append(rep.Judged, false)
	back := every(func(r StallRow) bool {
		return !r.Killed && r.ExitErr == "" && r.Replace.First > 0 && r.ReplaceErr == ""
	})
	ew := worst(func(r StallRow) float64 { return r.ExitMs })
	tot := worst(func(r StallRow) float64 { return nsMs(r.ShutdownStartNs, r.Replace.First) })
	add(back, "sdk: the process exits and a replacement serves", fmt.Sprintf("exit worst %.1f ms, Shutdown called -> replacement's first request worst %.0f ms%s", ew, tot, firstNonEmpty(sdk, func(r StallRow) string {
		return strings.TrimSpace(r.ExitErr + " " + r.ReplaceErr)
	})))
}

func firstNonEmpty(rows []StallRow, f func(StallRow) string) string {
	for _, r := range rows {
		if s := f(r); s != "" {
			return " (" + s + ")"
		}
	}
	return ""
}

func stallSeenText(r StallRow) string {
	st := r.Stall
	if st == nil {
		return "never reported"
	}
	return fmt.Sprintf("tenant %q stream %s (%s) kernel %q, %d queued, Health names it %v, RestartRequired %v, Healthy %v, Stats.Stalled %v, warning logged %v, other stalls %v",
		st.Tenant, st.Stream, st.Class, st.Kernel, st.Queued, st.HealthNames, st.RestartRequired, st.Healthy, st.StatsStalled, r.Warned, r.OtherStalls)
}

func nextText(n []NextCall) string {
	var parts []string
	for _, c := range n {
		v := "ErrStalled"
		if !c.Stalled {
			v = "NOT ErrStalled: " + c.Err
		}
		parts = append(parts, fmt.Sprintf("%s %.1f us %s", c.Call, c.Us, v))
	}
	if len(parts) == 0 {
		return "no call made (the stall was never reported)"
	}
	return strings.Join(parts, "; ")
}

// write prints every round's figures, the way back step by step, what MPS
// did after the SIGKILL, and the checks.
func (rep *StallReport) write(out io.Writer, sc stallCfg) {
	fmt.Fprintf(out, "\n### A tenant's kernel that never ends, bound %v: %v before against %v during (per round)\n", sc.bound, sc.before, sc.during)
	sim := len(rep.Rows) > 0 && rep.Rows[0].Simulated
	if sim {
		fmt.Fprintln(out, "\nSimulated: the fake driver's timings, not a GPU's: the timing checks are reported, not judged (n/a); the functional ones are judged.")
	}
	fmt.Fprintln(out, "\n| round | variant | work | interactive P99 before us | during us | during/before | batch before TFLOP/s | during | during/before | launch us | stall reported ms | watchdog found ms | next call max us | Shutdown ms | exit ms | way back ms |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rep.Rows {
		shut, back := "- (SIGKILL)", "-"
		if r.Variant == "sdk" {
			shut = fmt.Sprintf("%.1f", r.ShutdownMs)
		}
		if r.Replace.First > 0 {
			back = fmt.Sprintf("%.0f", nsMs(r.replaceFrom(), r.Replace.First))
		}
		fmt.Fprintf(out, "| %d | %s | %s | %.0f | %.0f | %.2fx | %s | %s | %.2fx | %.1f | %.1f | %.1f | %.1f | %s | %.1f | %s |\n",
			r.Round, r.Variant, r.Work, r.Before.P99us, r.During.P99us, r.P99Ratio, tflops(r.Before.BatchTFLOPs), tflops(r.During.BatchTFLOPs), r.BatchRatio,
			r.LaunchUs, r.ReportedMs, r.FoundMs, maxNextUs(r.Next), shut, r.ExitMs, back)
	}
	fmt.Fprintln(out, "\n(way back: from Pool.Shutdown called (sdk) or the SIGKILL (mps) to the replacement's first interactive request; requests: before / during per round in the JSON)")
	for _, r := range rep.Rows {
		if r.Round != 1 {
			continue
		}
		steps, total := r.steps()
		if r.Replace.First == 0 {
			fmt.Fprintf(out, "\n%s: no replacement served: %s\n", r.Variant, r.ReplaceErr)
			continue
		}
		fmt.Fprintf(out, "\n%s, round 1: the way back, step by step\n\n| step | ms |\n|---|---:|\n", r.Variant)
		for _, s := range steps {
			fmt.Fprintf(out, "| %s | %.1f |\n", s.Name, ms(s.Dur))
		}
		fmt.Fprintf(out, "| **total** | **%.1f** |\n", ms(total))
	}
	for _, r := range rep.Rows {
		fmt.Fprintf(out, "\nround %d %s: %s\n", r.Round, r.Variant, stallSeenText(r))
		fmt.Fprintf(out, "  next calls: %s\n", nextText(r.Next))
		if r.Variant == "sdk" {
			fmt.Fprintf(out, "  Pool.Shutdown(%v): %.1f ms: %q\n", sc.shutdown, r.ShutdownMs, r.ShutdownErr)
			if r.DrainLeft != "" {
				fmt.Fprintf(out, "  the drain (the classes' handles and buffers closed) had not returned after %.1f ms; left running, where it waited:\n%s\n", r.DrainMs, r.DrainLeft)
			} else {
				fmt.Fprintf(out, "  the drain (the classes' handles and buffers closed): %.1f ms\n", r.DrainMs)
			}
		}
		if r.NeighbourErrors > 0 || len(r.Hung) > 0 {
			fmt.Fprintf(out, "  the neighbours: %d failed calls (first: %s), hung: %v\n", r.NeighbourErrors, r.NeighbourError, r.Hung)
		}
		if m := r.MPS; m != nil {
			fmt.Fprintf(out, "  under MPS, after the spinning client's SIGKILL: it exited %.1f ms after it; the other clients in the %v after: interactive P99 %.0f us (%.2fx before, %d requests), batch %s TFLOP/s (%.2fx), %d failed calls%s, hung: %v; ",
				r.ExitMs, sc.during, r.After.P99us, r.AfterP99Ratio, r.After.Requests, tflops(r.After.BatchTFLOPs), r.AfterBatchRatio, r.After.Errors, firstErr(r.After.FirstError), r.Hung)
			if r.Replace.First > 0 {
				fmt.Fprintf(out, "a new client served its first request %.0f ms after the SIGKILL\n", nsMs(r.EndNs, r.Replace.First))
			} else {
				fmt.Fprintf(out, "no new client served: %s\n", r.ReplaceErr)
			}
			fmt.Fprintf(out, "  MPS servers (-mps-query): during the stall %q, after the SIGKILL %q, after the new client %q; the daemon quit in %.0f ms%s\n",
				m.ServersStalled, m.ServersKilled, m.ServersReplaced, m.QuitMs, firstErr(m.QuitErr))
		}
	}
	if len(rep.Checks) == 0 {
		return
	}
	fmt.Fprintln(out, "\nChecks (sdk; ratios: the median over rounds, bounds: the worst round; performance: reported, not fatal; a functional check failing fails the run):")
	for i, c := range rep.Checks {
		printCheck(out, c, rep.Judged[i])
	}
}

func firstErr(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// firstLine is the first line of stack naming a driver or library call
// (a cgo frame), else the one above the frame that names fn: where a call
// waits, in one line.
func firstLine(stack, fn string) string {
	if stack == "" {
		return ""
	}
	lines := strings.Split(stack, "\n")
	for _, l := range lines {
		if strings.Contains(l, "_Cfunc_") {
			return "waits in " + strings.TrimSpace(l)
		}
	}
	for i, l := range lines {
		if strings.Contains(l, fn) && i > 1 {
			return "waits in " + strings.TrimSpace(lines[i-2])
		}
	}
	return strings.TrimSpace(lines[0])
}
