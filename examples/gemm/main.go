// Command gemm runs cuBLAS bf16 GEMMs on fcsp tenants: an interactive
// tenant (decode-like m=64, n=k=4096, one at a time, latency per call) and
// a batch tenant (prefill-like 8192^3, back to back), in five modes, and a
// throughput sweep over partition sizes. cuBLAS is loaded at run time
// (-cublas); each tenant's handle is made inside Tenant.Do, told its SM
// count (cublasSetSmCountTarget) and given a workspace from the tenant's
// quota. Without a GPU or cuBLAS it says so and exits 0.
//
//	gemm [-modes whole,alone,shared,part16,part8,sweep] [-rounds 1] [-duration 3s] [-json out.json] [-png out.png]
//	     [-sweep-sms 8,16,32,64,rest] [-sweep-no-sm-target 8,16] [-sweep-repeats 2]
//	gemm -mps-role interactive|batch -duration 10s   # one side on the plain device, for scripts/mps-compare.sh
//
// The sweep runs each size alone after an unpartitioned baseline, repeats
// interleaved, samples NVML (SM clock, power, clock reasons) every 100 ms
// while each row runs, and reports throughput per SM both raw and per GHz
// of the mean SM clock: a board at its power limit clocks lower under a
// whole-chip GEMM than under an 8-SM one, which no partitioning changes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fcsp-go/fcsp-go/examples/internal/gemmjob"
	"github.com/fcsp-go/fcsp-go/fcsp"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gemm:", err)
		os.Exit(1)
	}
}

type config struct {
	cublas   string
	modes    []string
	duration time.Duration
	jsonPath string
	pngPath  string
	mpsRole  string
	rounds   int

	sweepSMs     []int // rest for WithRestOfSMs
	sweepNoHint  []int // sizes run again without cublasSetSmCountTarget
	sweepRepeats int
}

func parse(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("gemm", flag.ContinueOnError)
	fs.StringVar(&c.cublas, "cublas", "", "path of libcublas, used as given (default: "+strings.Join(gemmjob.DefaultCublas, ", then ")+")")
	modes := fs.String("modes", "whole,alone,shared,part16,part8,sweep", "modes to run, comma-separated")
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "time per mode")
	fs.StringVar(&c.jsonPath, "json", "", "write the results as JSON to this file")
	fs.StringVar(&c.pngPath, "png", "", "write a bar chart to this PNG file")
	fs.StringVar(&c.mpsRole, "mps-role", "", "run only this side (interactive or batch) on the plain device, for an MPS comparison")
	fs.IntVar(&c.rounds, "rounds", 1, "run the modes (all but sweep) this many times, interleaved, and report each mode's P99 over the same round's alone P99")
	sweepSMs := fs.String("sweep-sms", "8,16,32,64,rest", "sweep: tenant sizes (SM counts, rest: the SMs left), each alone after the unpartitioned baseline")
	noHint := fs.String("sweep-no-sm-target", "8,16", "sweep: sizes run once more per repeat without cublasSetSmCountTarget (empty: none)")
	fs.IntVar(&c.sweepRepeats, "sweep-repeats", 2, "sweep: run every size this many times, interleaved, and print min-max")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	if c.sweepSMs, err = parseSizes("sweep-sms", *sweepSMs, false); err != nil {
		return c, err
	}
	if c.sweepNoHint, err = parseSizes("sweep-no-sm-target", *noHint, true); err != nil {
		return c, err
	}
	if c.sweepRepeats < 1 {
		return c, fmt.Errorf("-sweep-repeats %d: want at least 1", c.sweepRepeats)
	}
	c.modes = strings.Split(*modes, ",")
	for _, m := range c.modes {
		if _, ok := modeTable[m]; !ok {
			return c, fmt.Errorf("unknown mode %q (want some of whole, alone, shared, part16, part8, sweep)", m)
		}
	}
	if c.rounds < 1 {
		return c, fmt.Errorf("-rounds %d: want at least 1", c.rounds)
	}
	if c.duration <= 0 {
		return c, fmt.Errorf("-duration %v: want more than 0", c.duration)
	}
	if c.mpsRole != "" && c.mpsRole != "interactive" && c.mpsRole != "batch" {
		return c, fmt.Errorf("-mps-role %q: want interactive or batch", c.mpsRole)
	}
	return c, nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parse(args)
	if err != nil {
		return err
	}
	pool, err := fcsp.Open(ctx, 0)
	if errors.Is(err, fcsp.ErrNoDriver) {
		fmt.Fprintf(out, "no GPU here (%v): nothing to measure\n", err)
		return nil
	}
	if err != nil {
		return err
	}
	defer pool.Close()
	// An explicit -cublas path is used as given; only the default searches.
	if cfg.cublas, err = gemmjob.LoadCublas(cfg.cublas); err != nil {
		fmt.Fprintf(out, "no cuBLAS (%v): nothing to measure; give its path with -cublas\n", err)
		return nil
	}
	fmt.Fprintf(out, "%s, cuBLAS %s\n", pool.Device(), cfg.cublas)
	if cfg.mpsRole != "" {
		return runMPSRole(ctx, pool, cfg, out)
	}
	// Rounds interleave the modes, so that each partitioned P99 is judged
	// against an alone P99 measured minutes, not a whole run, apart: the
	// tail moves by tens of microseconds from call to call on the H200.
	var rep report
	var rounds [][]Result
	for round := range cfg.rounds {
		var this []Result
		for _, m := range cfg.modes {
			if m == "sweep" {
				continue
			}
			r, err := runMode(ctx, pool, m, cfg.duration)
			if err != nil {
				return fmt.Errorf("mode %s: %w", m, err)
			}
			r.Round = round + 1
			fmt.Fprintln(out, r)
			rep.Modes = append(rep.Modes, r)
			this = append(this, r)
		}
		rounds = append(rounds, this)
	}
	if slices.Contains(cfg.modes, "sweep") {
		if f := pool.NVML(); f.Available {
			fmt.Fprintf(out, "NVML before the sweep: SM clock %d MHz (max %d), power %.0f W (limit %.0f W), clock reasons: %v%s\n",
				f.SMClockMHz, f.SMClockMaxMHz, f.PowerW, f.PowerLimitW, f.ClockReasons, noteSuffix(strings.Join(f.Refused, "; ")))
		} else {
			fmt.Fprintf(out, "NVML unavailable (%s): the sweep reports no clocks or power\n", f.Reason)
		}
		rows, err := sweep(ctx, pool, cfg.duration, planSweep(cfg.sweepSMs, cfg.sweepNoHint, cfg.sweepRepeats), out)
		if err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
		rep.Sweep = rows
		rep.SweepSummary = summarizeSweep(rows)
	}
	rep.ToAlone = ratiosToAlone(rounds)
	return rep.write(out, cfg.jsonPath, cfg.pngPath)
}
