// Command loadgen drives examples/server on this machine: batch requests
// from closed-loop workers that keep the batch tenant saturated, and
// interactive requests at a fixed rate (or closed loop) whose P50, P99 and
// P999 latency it reports. It only talks to loopback addresses, and every
// run is bounded by -duration and -max-requests.
//
// With -spawn it starts the server binary itself for each mode in turn (on a
// free 127.0.0.1 port, passing the arguments after "--" through), waits for
// GET /healthz, runs the load, stops the server with SIGTERM, and prints one
// table: an "alone" row (interactive with no batch load), then a row per mode.
//
//	go run ./examples/loadgen -addr 127.0.0.1:8080                 # one run against a running server
//	go run ./examples/loadgen -spawn ./server -duration 20s         # alone, shared, ratelimit, partitioned
//	go run ./examples/loadgen -spawn ./server -modes partitioned -rounds 3 -duration 2s -- -batch-gpu-share 0.9
//	go run ./examples/loadgen -spawn ./server -json -- -simulate -interactive-n 4096 -interactive-steps 16 -batch-n 65536 -batch-steps 16
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

type options struct {
	addr, spawn   string
	modes         []string
	alone         bool
	rounds        int
	readyTimeout  time.Duration
	stopGrace     time.Duration
	asJSON, quiet bool
	serverLog     string
	serverArgs    []string
	load          load
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "server address (loopback only; ignored with -spawn)")
	fs.StringVar(&o.spawn, "spawn", "", "server binary to start once per mode (arguments after -- go to it)")
	modes := fs.String("modes", "shared,ratelimit,partitioned", "modes to run with -spawn")
	fs.BoolVar(&o.alone, "alone", true, "with -spawn, first measure interactive alone (no batch load, shared mode)")
	fs.IntVar(&o.rounds, "rounds", 1, "with -spawn, run alone and the modes this many times, interleaved, and report each mode's P99 against the same round's alone P99 (median and range)")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", 60*time.Second, "how long a spawned server may take to answer /healthz")
	fs.DurationVar(&o.stopGrace, "stop-grace", 30*time.Second, "how long a spawned server may take to exit after SIGTERM")
	fs.StringVar(&o.serverLog, "server-log", "", "append spawned servers' output to this file (default: shown only on failure)")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON instead of a table")
	fs.DurationVar(&o.load.duration, "duration", 5*time.Second, "length of each run")
	fs.DurationVar(&o.load.warmup, "warmup", 0, "run the same load this long first, unrecorded (a fresh server's first requests pay for its warm-up)")
	fs.Int64Var(&o.load.maxRequests, "max-requests", 20000, "most requests of each run, both classes together")
	fs.IntVar(&o.load.batchWorkers, "batch-workers", 4, "concurrent closed-loop batch workers (0: no batch load)")
	fs.Float64Var(&o.load.interactiveRate, "interactive-rate", 0, "interactive requests per second (0: closed loop)")
	fs.IntVar(&o.load.interactiveWorkers, "interactive-workers", 1, "closed-loop interactive workers, or the most in flight at -interactive-rate")
	fs.DurationVar(&o.load.timeout, "timeout", 60*time.Second, "per-request client timeout")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.serverArgs = fs.Args()
	if o.spawn != "" && !slices.ContainsFunc(o.serverArgs, isBatchLimit) {
		// The configuration to run: the batch class under a GPU-time share.
		// The server's own default, a launch-rate limit of 0.5, gave the
		// batch class 166 req/s on the H200 beside 631 at this share.
		o.serverArgs = append(o.serverArgs, "-batch-gpu-share", "0.9")
	}
	o.modes = strings.Split(*modes, ",")
	return o, o.validate()
}

// isBatchLimit reports whether a server argument sets the batch class's
// limit, so that the loadgen's default does not override it.
func isBatchLimit(a string) bool {
	a = strings.TrimLeft(a, "-")
	return strings.HasPrefix(a, "batch-gpu-share") || strings.HasPrefix(a, "batch-sm-limit") || strings.HasPrefix(a, "config")
}

func (o *options) validate() error {
	var errs []error
	l := o.load
	if l.warmup < 0 || l.warmup > time.Hour {
		errs = append(errs, fmt.Errorf("-warmup %v: want 0 to 1h", l.warmup))
	}
	if l.duration <= 0 || l.duration > time.Hour {
		errs = append(errs, fmt.Errorf("-duration %v: want more than 0 and at most 1h", l.duration))
	}
	if l.maxRequests <= 0 {
		errs = append(errs, fmt.Errorf("-max-requests %d: want at least 1", l.maxRequests))
	}
	if o.rounds < 1 || o.rounds > 100 {
		errs = append(errs, fmt.Errorf("-rounds %d: want 1 to 100", o.rounds))
	}
	if l.batchWorkers < 0 || l.interactiveWorkers < 1 || l.interactiveRate < 0 {
		errs = append(errs, errors.New("-batch-workers >= 0, -interactive-workers >= 1 and -interactive-rate >= 0, please"))
	}
	if o.spawn == "" {
		errs = append(errs, checkLoopback(o.addr))
		if len(o.serverArgs) > 0 {
			errs = append(errs, fmt.Errorf("arguments %q: server arguments need -spawn", o.serverArgs))
		}
	}
	return errors.Join(errs...)
}

func main() {
	o, err := parseOptions(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, o)
	if len(rep.Rows) > 0 {
		if o.asJSON {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(rep)
		} else {
			printTable(os.Stdout, rep)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) (Report, error) {
	rep := Report{Settings: map[string]any{
		"duration_s": o.load.duration.Seconds(), "max_requests": o.load.maxRequests, "batch_workers": o.load.batchWorkers,
		"warmup_s": o.load.warmup.Seconds(), "rounds": o.rounds,
		"interactive_rate": o.load.interactiveRate, "interactive_workers": o.load.interactiveWorkers, "server_args": o.serverArgs,
	}}
	if o.spawn == "" {
		row, ran, err := measure(ctx, o.addr, o.load)
		if ran {
			rep.Rows = append(rep.Rows, row)
		}
		return rep, err
	}
	var log io.Writer
	if o.serverLog != "" {
		f, err := os.OpenFile(o.serverLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return rep, err
		}
		defer f.Close()
		log = f
	}
	type phase struct {
		label, mode string
		load        load
		round       int
	}
	// Rounds interleave: alone and each mode measured next to each other in
	// time, so that a drift of the machine (clocks, another tenant of the
	// host) moves a round's alone and mode rows together rather than
	// showing up as a ratio.
	var phases []phase
	for r := 1; r <= o.rounds; r++ {
		if o.alone {
			alone := o.load
			alone.batchWorkers = 0
			phases = append(phases, phase{"alone", "shared", alone, r})
		}
		for _, m := range o.modes {
			phases = append(phases, phase{m, m, o.load, r})
		}
	}
	var errs []error
	for _, p := range phases {
		if ctx.Err() != nil {
			break
		}
		row, ran, err := spawnAndMeasure(ctx, o, p.mode, p.load, log)
		row.Mode = p.label
		if o.rounds > 1 {
			row.Round = p.round
		}
		if ran { // a server that never came up measured nothing: no row of zeros
			rep.Rows = append(rep.Rows, row)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.label, err))
		}
	}
	rep.VsAlone = vsAlone(rep.Rows)
	return rep, errors.Join(errs...)
}

// measure runs the load against a server that is already up; ran says
// whether it got as far as sending the load.
func measure(ctx context.Context, addr string, l load) (row Row, ran bool, err error) {
	d := newDriver(addr, l)
	h, err := d.health(ctx)
	if err != nil {
		return Row{}, false, fmt.Errorf("no server answers at %s (%w); start one (go run ./examples/server -addr %s), or have loadgen start one per mode: go build -o server ./examples/server && go run ./examples/loadgen -spawn ./server",
			addr, err, addr)
	}
	row, err = d.run(ctx, l)
	row.Mode, row.Device, row.Simulated = h.Mode, h.Device, h.Simulated
	return row, true, err
}

// spawnAndMeasure starts the server in mode, measures it and stops it; ran
// says whether the server came up and the load was sent.
func spawnAndMeasure(ctx context.Context, o options, mode string, l load, log io.Writer) (row Row, ran bool, err error) {
	s, err := spawn(o.spawn, mode, o.serverArgs, log)
	if err != nil {
		return row, false, err
	}
	defer func() {
		clean, serr := s.stop(o.stopGrace)
		row.CleanExit = &clean
		err = errors.Join(err, serr)
	}()
	d := newDriver(s.addr, l)
	h, err := s.waitReady(ctx, d, o.readyTimeout)
	if err != nil {
		return row, false, err
	}
	if h.Mode != mode {
		return row, false, fmt.Errorf("asked for mode %s, the server says %s", mode, h.Mode)
	}
	row, err = d.run(ctx, l)
	row.Device, row.Simulated = h.Device, h.Simulated
	return row, true, err
}
