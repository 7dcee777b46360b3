// Command hotpath measures the SDK's hot paths beside their physical floors
// and beside other libraries, in one run: per-call P50 and P99 at several
// goroutine counts, repeated in interleaved rounds, each figure reported as
// the median of the rounds with their spread (min-max), and the machine's
// load before and after.
//
//	go run ./cmd/hotpath -md            # markdown tables
//	go run ./cmd/hotpath -json out.json # every round's figures
//
// Each call is timed on its own with time.Since, so every figure includes
// one clock read; the "clock: time.Since(base)" row is that cost alone.
// With more goroutines than cores, a P99 also holds goroutines that were
// descheduled between their two clock reads: read the figures beside the
// row of the floor, measured the same way in the same round.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "hotpath:", err)
		os.Exit(1)
	}
}

type config struct {
	rounds     int
	calls      int
	goroutines []int
	only       *regexp.Regexp
	md         bool
	jsonPath   string
	admission  int // calls per path and round in the admission table; 0: none
}

func parse(args []string) (config, error) {
	fs := flag.NewFlagSet("hotpath", flag.ContinueOnError)
	rounds := fs.Int("rounds", 6, "interleaved rounds; each figure is the median of the rounds")
	calls := fs.Int("calls", 100000, "timed calls per target, goroutine count and round (split among the goroutines)")
	gs := fs.String("g", "1,4,16,64", "goroutine counts, comma-separated")
	only := fs.String("only", "", "run only targets whose name matches this regular expression")
	md := fs.Bool("md", false, "print markdown tables (default: plain text)")
	js := fs.String("json", "", "write every round's figures and the medians as JSON to this file ('-': stdout)")
	adm := fs.Int("admission", 1000000, "calls per path and round in the launch admission table (1 goroutine, block-timed, against the clock+CAS floor); 0: no table")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	c := config{rounds: *rounds, calls: *calls, md: *md, jsonPath: *js, admission: *adm}
	if c.admission < 0 {
		return c, fmt.Errorf("-admission %d: a number of calls >= 0 is needed (0: no table)", c.admission)
	}
	if c.rounds < 1 {
		return c, fmt.Errorf("-rounds %d: at least 1 round is needed", c.rounds)
	}
	if c.calls < 100 {
		return c, fmt.Errorf("-calls %d: at least 100 calls are needed for a P99", c.calls)
	}
	for _, f := range strings.Split(*gs, ",") {
		g, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || g < 1 || g > 4096 {
			return c, fmt.Errorf("-g %q: goroutine counts must be integers in 1..4096", *gs)
		}
		c.goroutines = append(c.goroutines, g)
	}
	re, err := regexp.Compile(*only)
	if err != nil {
		return c, fmt.Errorf("-only: %w", err)
	}
	c.only = re
	return c, nil
}

func run(args []string, w io.Writer) error {
	c, err := parse(args)
	if err != nil {
		return err
	}
	var ts []target
	for _, t := range targets() {
		if c.only.MatchString(t.name) {
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		return fmt.Errorf("-only %q matches no target", c.only)
	}
	rep := report{
		Date:       time.Now().UTC().Format(time.RFC3339),
		CPU:        cpuModel(),
		CPUs:       runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Go:         runtime.Version(),
		Command:    strings.Join(append([]string{"hotpath"}, args...), " "),
		Rounds:     c.rounds,
		Calls:      c.calls,
		Goroutines: c.goroutines,
		LoadBefore: loadavg(),
	}
	start := time.Now()
	// cells[target][g] collects one figure per round.
	cells := make([][]cell, len(ts))
	for i := range cells {
		cells[i] = make([]cell, len(c.goroutines))
	}
	for r := 0; r < c.rounds; r++ {
		// Interleave: every round runs every cell once, starting each round
		// at a different target, so drift in the machine's load spreads over
		// all rows instead of biasing the ones run last.
		for k := range ts {
			i := (k + r) % len(ts)
			for j, g := range c.goroutines {
				f, err := measure(ts[i], g, c.calls)
				if err != nil {
					return fmt.Errorf("%s, %d goroutines: %w", ts[i].name, g, err)
				}
				cells[i][j].Rounds = append(cells[i][j].Rounds, f)
			}
		}
	}
	if c.admission > 0 {
		if rep.Admission, err = measureAdmission(c.rounds, c.admission); err != nil {
			return fmt.Errorf("admission table: %w", err)
		}
	}
	rep.Seconds = time.Since(start).Seconds()
	rep.LoadAfter = loadavg()
	for i, t := range ts {
		row := row{Name: t.name, Group: t.group, Vs: t.vs, Note: t.note}
		for j, g := range c.goroutines {
			cl := cells[i][j]
			cl.Goroutines = g
			cl.summarise()
			row.Cells = append(row.Cells, cl)
		}
		rep.Rows = append(rep.Rows, row)
	}
	if c.jsonPath != "" {
		out := w
		if c.jsonPath != "-" {
			f, err := os.Create(c.jsonPath)
			if err != nil {
				return err
			}
			defer f.Close()
			out = f
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", " ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
		if c.jsonPath == "-" {
			return nil
		}
	}
	rep.write(w, c.md)
	if len(rep.Admission) > 0 {
		writeAdmission(w, rep.Admission, c.admission, c.md)
	}
	return nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.TrimSpace(string(b))
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
