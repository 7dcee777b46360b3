package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// roleResult is what an -mps-role process prints as its last line.
type roleResult struct {
	Role        string    `json:"role"`
	Cell        Cell      `json:"cell"`
	Burst       *BurstRow `json:"burst,omitempty"` // -burst's interactive process`
	SMs         []int     `json:"sms_seen,omitempty"`
	Launches    int       `json:"probe_launches"`
	NotComputed bool      `json:"not_computed,omitempty"`
}

// announce is the interactive process's window: it says "measure" on
// stdout when its measurement starts, so that the parent starts the
// others'.
type announce struct {
	timed
	out io.Writer
}

func (a announce) waitStart(ctx context.Context) error {
	if err := a.timed.waitStart(ctx); err != nil {
		return err
	}
	fmt.Fprintln(a.out, "measure")
	return nil
}

// stdinWindow is the batch and storm processes' window: from a "start"
// line on stdin to its end.
type stdinWindow struct{ sc *bufio.Scanner }

func (w stdinWindow) waitStart(context.Context) error {
	for w.sc.Scan() {
		if strings.TrimSpace(w.sc.Text()) == "start" {
			return nil
		}
	}
	return w.sc.Err()
}

func (w stdinWindow) waitEnd(context.Context) error {
	for w.sc.Scan() {
	}
	return w.sc.Err()
}

// runRole is one side of one mps cell: a process on the plain device (an
// unpartitioned tenant, where MPS's active-thread percentage applies)
// with its own storm goroutines.
// killAll ends the children that have not exited: a cell that failed
// leaves none running.
func killAll(kids []*child) {
	for _, k := range kids {
		if k.cmd.ProcessState == nil {
			_ = k.stdin.Close()
			_ = k.cmd.Process.Kill()
			_ = k.cmd.Wait()
		}
	}
}

// openRole opens a role process's pool, on the plain device, and picks
// its work: cuBLAS where it loaded on a GPU, else the chain kernel.
func openRole(ctx context.Context, cfg config, errw io.Writer) (*fcsp.Pool, workKind, error) {
	op := &opener{cfg: cfg, errw: errw, out: errw}
	haveCublas := loadCublas(&cfg, errw)
	pool, err := op.open(ctx)
	if err != nil {
		return nil, workKind{}, err
	}
	return pool, workFor(pool, haveCublas), nil
}

func runRole(ctx context.Context, cfg config, out, errw io.Writer) error {
	if cfg.bursts.quiet > 0 && cfg.mpsRole == "interactive" {
		return runBurstRole(ctx, cfg, out, errw)
	}
	pool, wk, err := openRole(ctx, cfg, errw)
	if err != nil {
		return err
	}
	defer pool.Close()
	t, err := pool.NewTenant("mps-" + cfg.mpsRole)
	if err != nil {
		return err
	}
	defer t.Close()
	k, kind := cfg.ks[0], cfg.storms[0]
	env := cellEnv{storm: newStormEnv(pool), stormTenants: []*fcsp.Tenant{t}}
	var cl *class
	if cfg.mpsRole != "storm" {
		n := k
		if cfg.mpsRole == "batch" {
			n = cfg.batchKFor(k)
		}
		if cl, err = newClass(ctx, cfg.mpsRole, t, cfg.mpsRole == "batch", n, wk); err != nil {
			return err
		}
		defer cl.close(ctx)
		if cfg.probeEvery > 0 {
			if cl.probe, err = newProbe(ctx, t, pool.Device().SMs); err != nil {
				return err
			}
		}
	}
	var w window
	if cfg.mpsRole == "interactive" {
		env.inter = cl
		w = announce{timed{cfg.warmup, cfg.duration}, out}
	} else {
		env.batch = cl
		fmt.Fprintln(out, "ready")
		w = stdinWindow{bufio.NewScanner(os.Stdin)}
	}
	c, err := runCell(ctx, env, cellOpts{k: k, batchK: cfg.batchKFor(k), kind: kind, stormG: cfg.stormGFor(k), pace: cfg.pace, probe: cfg.probeEvery}, w)
	if err != nil {
		return err
	}
	c.Layout, c.Work, c.InterSMs, c.Simulated = "mps", wk.String(), t.SMs(), pool.Device().Simulated
	r := roleResult{Role: cfg.mpsRole, Cell: c}
	if cl != nil && cl.probe != nil {
		r.SMs, r.Launches, r.NotComputed = cl.probe.take()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, string(b))
	return nil
}

// child is one -mps-role process as the parent sees it.
type child struct {
	role   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr bytes.Buffer
	result *roleResult
}

// selfEnv marks a child as this program's main, so that a test binary
// standing in for the program (TestMain) runs it rather than the tests.
const selfEnv = "STORM_AS_MAIN=1"

func startChild(ctx context.Context, exe, role string, args []string, env ...string) (*child, error) {
	c := &child{role: role, lines: make(chan string, 16)}
	c.cmd = exec.CommandContext(ctx, exe, append([]string{"-mps-role", role}, args...)...)
	c.cmd.Env = append(append(os.Environ(), selfEnv), env...)
	c.cmd.Stderr = &c.stderr
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s process: %w", role, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	return c, nil
}

// until reads lines until one equals want (true) or the output ends
// (false); a JSON line on the way is the result.
func (c *child) until(want string) bool {
	for l := range c.lines {
		if l == want {
			return true
		}
		c.take(l)
	}
	return false
}

func (c *child) take(l string) {
	if strings.HasPrefix(l, "{") {
		var r roleResult
		if json.Unmarshal([]byte(l), &r) == nil {
			c.result = &r
		}
	}
}

// finish closes stdin (the end of the window), reads the rest and waits.
func (c *child) finish() error {
	_ = c.stdin.Close()
	c.until("\x00")
	err := c.cmd.Wait()
	if err == nil && c.result == nil {
		err = errors.New("no result line")
	}
	if err != nil {
		return fmt.Errorf("%s process: %w: %s", c.role, err, tail(c.stderr.String(), 6))
	}
	return nil
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], " | ")
}

func shell(ctx context.Context, cmd string) error {
	if cmd == "" {
		return nil
	}
	b, err := exec.CommandContext(ctx, "sh", "-c", cmd).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", cmd, err, tail(string(b), 4))
	}
	return nil
}

// runMPSLayout starts the MPS daemon, runs each cell as two or three
// processes (batch at -mps-batch-pct, interactive at -mps-inter-pct, the
// storm's third process at 100%), and stops the daemon.
func runMPSLayout(ctx context.Context, cfg config, round int, out, errw io.Writer) (cells []Cell, chk SMCheck, err error) {
	chk = SMCheck{Round: round, Layout: "mps"}
	exe, err := os.Executable()
	if err != nil {
		return nil, chk, err
	}
	stop, err := startMPS(ctx, cfg)
	if err != nil {
		return nil, chk, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	inter, batch := map[int]bool{}, map[int]bool{}
	for _, key := range cfg.plan("mps") {
		c, ri, rb, err := mpsCell(ctx, exe, cfg, key)
		if err != nil {
			return cells, chk, fmt.Errorf("K=%d storm %s: %w", key.k, key.storm, err)
		}
		c.Round = round
		fmt.Fprintln(out, c)
		cells = append(cells, c)
		for _, sm := range ri.SMs {
			inter[sm] = true
		}
		for _, sm := range rb.SMs {
			batch[sm] = true
		}
		chk.Launches += ri.Launches + rb.Launches
		chk.NotComputed = chk.NotComputed || ri.NotComputed || rb.NotComputed
	}
	chk.Interactive, chk.Batch = sortedKeys(inter), sortedKeys(batch)
	chk.Overlap = intersect(chk.Interactive, chk.Batch)
	return cells, chk, nil
}

// startMPS starts the MPS daemon (-mps-start) for one layout of one
// round; stop stops it (-mps-stop) and waits for its exit, so that the
// next layout's pool is no MPS client.
func startMPS(ctx context.Context, cfg config) (stop func() error, err error) {
	if err := shell(ctx, cfg.mpsStart); err != nil {
		return nil, fmt.Errorf("starting the MPS daemon: %w", err)
	}
	if cfg.mpsStart != "" {
		time.Sleep(time.Second) // as scripts/mps-compare.sh: the daemon is up
	}
	return func() error {
		err := shell(ctx, cfg.mpsStop)
		if cfg.mpsStop != "" {
			time.Sleep(time.Second) // the daemon's exit, before the next layout opens the device
		}
		if err != nil {
			return fmt.Errorf("stopping the MPS daemon: %w", err)
		}
		return nil
	}, nil
}

func sortedKeys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// mpsCell runs one cell as processes: batch (and storm) first, ready
// before the interactive side starts; their windows open when the
// interactive side starts measuring and close when it is done.
func mpsCell(ctx context.Context, exe string, cfg config, key cellKey) (c Cell, ri, rb roleResult, err error) {
	args := []string{"-k", strconv.Itoa(key.k), "-batch-k", strconv.Itoa(cfg.batchK), "-storm", key.storm, "-storm-g", strconv.Itoa(cfg.stormG),
		"-pace", cfg.pace.String(), "-warmup", cfg.warmup.String(), "-duration", cfg.duration.String(),
		"-probe-every", cfg.probeEvery.String(), "-maxconn=false", "-wait", cfg.wait, "-heap", strconv.Itoa(cfg.heapMiB)}
	if cfg.cublas != "" {
		args = append(args, "-cublas", cfg.cublas)
	}
	if cfg.simulate {
		args = append(args, "-simulate")
	}
	var kids []*child
	defer func() { killAll(kids) }() // on an error, nobody is left running
	pct := func(p int) string { return "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=" + strconv.Itoa(p) }
	b, err := startChild(ctx, exe, "batch", args, pct(cfg.mpsBatch))
	if err != nil {
		return c, ri, rb, err
	}
	kids = append(kids, b)
	others := []*child{b}
	if key.storm != stormNone {
		s, err := startChild(ctx, exe, "storm", args)
		if err != nil {
			return c, ri, rb, err
		}
		kids = append(kids, s)
		others = append(others, s)
	}
	for _, o := range others {
		if !o.until("ready") {
			return c, ri, rb, o.finish()
		}
	}
	it, err := startChild(ctx, exe, "interactive", args, pct(cfg.mpsInter))
	if err != nil {
		return c, ri, rb, err
	}
	kids = append(kids, it)
	if it.until("measure") {
		for _, o := range others {
			fmt.Fprintln(o.stdin, "start")
		}
	}
	var errs []error
	errs = append(errs, it.finish())
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, o := range others {
		wg.Go(func() {
			e := o.finish()
			mu.Lock()
			errs = append(errs, e)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return c, ri, rb, err
	}
	ri, rb = *it.result, *b.result
	c = ri.Cell
	c.BatchGEMMs, c.BatchTFLOPs, c.BatchSMs = rb.Cell.BatchGEMMs, rb.Cell.BatchTFLOPs, rb.Cell.InterSMs
	// The storm's calls/s: all three processes together.
	for _, o := range others {
		for k, v := range o.result.Cell.StormPerS {
			if c.StormPerS == nil {
				c.StormPerS = map[string]float64{}
			}
			c.StormPerS[k] += v
		}
	}
	return c, ri, rb, nil
}

// MaxConnRow is the partitioned layout run once with
// CUDA_DEVICE_MAX_CONNECTIONS=1 in a child process: what the SDK said
// (Open's error, its warnings) and the P99 it got.
type MaxConnRow struct {
	Env   string   `json:"env"`
	Exit  int      `json:"exit"`
	Said  []string `json:"sdk_said"` // the child's stderr: Open's error, the pool's warnings
	P50us float64  `json:"p50_us,omitempty"`
	P99us float64  `json:"p99_us,omitempty"`
	Error string   `json:"error,omitempty"`
}

func runMaxConn(ctx context.Context, cfg config, out io.Writer) MaxConnRow {
	row := MaxConnRow{Env: "CUDA_DEVICE_MAX_CONNECTIONS=1"}
	exe, err := os.Executable()
	if err != nil {
		row.Error = err.Error()
		return row
	}
	f, err := os.CreateTemp("", "storm-maxconn-*.json")
	if err != nil {
		row.Error = err.Error()
		return row
	}
	f.Close()
	defer os.Remove(f.Name())
	args := []string{"-layouts", "partitioned", "-k", "1", "-batch-k", strconv.Itoa(cfg.batchK), "-storm", "none", "-rounds", "1", "-maxconn=false",
		"-duration", cfg.duration.String(), "-warmup", cfg.warmup.String(), "-probe-every", "0",
		"-inter-sms", strconv.Itoa(cfg.interSMs), "-json", f.Name()}
	if cfg.cublas != "" {
		args = append(args, "-cublas", cfg.cublas)
	}
	if cfg.simulate {
		args = append(args, "-simulate")
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), selfEnv, row.Env)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	_ = cmd.Run()
	row.Exit = cmd.ProcessState.ExitCode()
	for _, l := range strings.Split(stderr.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" && len(row.Said) < 12 {
			row.Said = append(row.Said, l)
		}
	}
	var rep report
	if b, err := os.ReadFile(f.Name()); err == nil && json.Unmarshal(b, &rep) == nil && len(rep.Cells) > 0 {
		row.P50us, row.P99us = rep.Cells[0].P50us, rep.Cells[0].P99us
	}
	fmt.Fprintln(out, row)
	return row
}

func (r MaxConnRow) String() string {
	said := "nothing (no error from Open, no warning logged)"
	if len(r.Said) > 0 {
		said = strings.Join(r.Said, " | ")
	}
	if r.Error != "" {
		said = r.Error
	}
	return fmt.Sprintf("%s (partitioned, K=1, no storm, child process): exit %d, P50 %.1f us, P99 %.1f us; the SDK said: %s",
		r.Env, r.Exit, r.P50us, r.P99us, said)
}
