// Command bench prints the headline table: for each metric, the SDK's
// figure, a baseline's figure measured in the same run, and their ratio.
//
// It opens GPU 0 (or -device) through the NVIDIA driver; where there is no
// driver it says so and runs on a simulated H200 instead, where the rows that
// call the driver measure only the SDK's own CPU overhead (they are labelled)
// and the isolation rows, which need real SMs, are skipped.
//
// The metrics, each against a baseline from this same run:
//
//   - create: tenant creation (cold green context, prewarmed, unpartitioned)
//     against raw cuGreenCtxCreate and cuCtxCreate;
//   - memory: tracked 1 MiB alloc+free against raw cuMemAlloc/cuMemFree, and
//     the quota check against a HAMi-style lock with an O(N) slot scan;
//   - contention: P50/P99 of the quota check from 4 and 64 goroutines;
//   - rate: tokenbucket against golang.org/x/time/rate (acquire cost,
//     admitted-rate accuracy, SetRate lag);
//   - isolation: the day-94 short job on its own SMs against sharing them;
//   - launch: a tenant stream's Launch against raw cuLaunchKernel.
//
// The ratio is always ours / baseline: below 1, ours is cheaper (or, for the
// accuracy row, less accurate). Published figures of other systems are never
// measured here; they appear only in footnotes that say so.
//
// Usage:
//
//	go run ./cmd/bench                  # table on stdout, progress on stderr
//	go run ./cmd/bench -quick           # a short run (CI)
//	go run ./cmd/bench -json            # machine-readable
//	go run ./cmd/bench -md              # Markdown for docs/BENCHMARKS.md
//	go run ./cmd/bench -png ratios.png  # and a bar chart of the ratios
//	go run ./cmd/bench -sections create,launch
//
// The GPU machine has no Go toolchain: build it here (go build -o
// .bin/bench ./cmd/bench) and run the binary there.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// config is what the flags set.
type config struct {
	device   int
	simulate bool
	quick    bool
	asJSON   bool
	asMD     bool
	png      string
	sections map[string]bool
	args     []string // the command line, for the Markdown header

	// Isolation (day-94) sizes.
	batchN, batchSteps, shortN, shortSteps, shortLaunches, reps int
	// Rate accuracy: tokens per second.
	rate float64
}

// allSections lists the sections in the order they run and print.
var allSections = []string{"create", "memory", "contention", "rate", "isolation", "launch"}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := config{args: args}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.device, "device", 0, "GPU index")
	fs.BoolVar(&c.simulate, "simulate", false, "use the simulated H200 even if a GPU is present")
	fs.BoolVar(&c.quick, "quick", false, "short run: few iterations (CI, tests)")
	fs.BoolVar(&c.asJSON, "json", false, "print JSON instead of the table")
	fs.BoolVar(&c.asMD, "md", false, "print the table as Markdown, with date, machine and command line")
	fs.StringVar(&c.png, "png", "", "also write a bar chart of the ratios to this PNG file")
	sections := fs.String("sections", strings.Join(allSections, ","), "comma-separated sections to run")
	fs.IntVar(&c.batchN, "batch-n", 4<<20, "isolation: batch job elements")
	fs.IntVar(&c.batchSteps, "batch-steps", 8192, "isolation: batch job FMA steps per element")
	fs.IntVar(&c.shortN, "short-n", 64<<10, "isolation: short job elements")
	fs.IntVar(&c.shortSteps, "short-steps", 1024, "isolation: short job FMA steps per element")
	fs.IntVar(&c.shortLaunches, "short-launches", 64, "isolation: short job launches")
	fs.IntVar(&c.reps, "reps", 5, "isolation: repetitions of each schedule (the median is reported)")
	fs.Float64Var(&c.rate, "rate", 100_000, "rate: tokens per second for the accuracy rows")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.asJSON && c.asMD {
		return c, errors.New("-json and -md: choose one")
	}
	if !(c.rate > 0) {
		return c, fmt.Errorf("-rate %v: want a positive rate", c.rate)
	}
	if c.batchN <= 0 || c.batchSteps <= 0 || c.shortN <= 0 || c.shortSteps <= 0 || c.shortLaunches <= 0 || c.reps <= 0 {
		return c, errors.New("isolation sizes must be positive")
	}
	c.sections = map[string]bool{}
	for _, s := range strings.Split(*sections, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !contains(allSections, s) {
			return c, fmt.Errorf("-sections: unknown section %q; want some of %s", s, strings.Join(allSections, ","))
		}
		c.sections[s] = true
	}
	return c, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func main() {
	c, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if err := run(context.Background(), c, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench: FAIL:", err)
		os.Exit(1)
	}
}

// run measures and prints the report in the format the flags ask for.
func run(ctx context.Context, c config, stdout, stderr io.Writer) error {
	rep, err := measure(ctx, c, stderr)
	if err != nil {
		return err
	}
	switch {
	case c.asJSON:
		err = writeJSON(stdout, rep)
	case c.asMD:
		err = writeMarkdown(stdout, rep)
	default:
		err = writeTable(stdout, rep)
	}
	if err != nil {
		return err
	}
	if c.png != "" {
		if err := writePNG(c.png, rep); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "bench: wrote", c.png)
	}
	return nil
}
