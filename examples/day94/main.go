// Command day94 reproduces the day-94 lesson through the SDK's public API:
// the split the driver is willing to make, then one dependent-FMA kernel run
// as a long batch job and a stream of short jobs under five schedules
// (alone, alone, one stream, two streams, two green-context partitions) and
// an uneven split, timed on the GPU clock and checked bit for bit.
//
// Without a GPU it says so and prints the split table of a simulated H200.
//
//	go run ./examples/day94            # the GPU if there is one, else simulated
//	go run ./examples/day94 -json      # machine-readable
//	go run ./examples/day94 -svg day94.svg   # and the schedule bands as a chart
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/fcsp-go/fcsp-go/examples/workload"
	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
)

type config struct {
	device              int
	batchN, batchSteps  int
	shortN, shortSteps  int
	shortLaunches, reps int
	simulate, asJSON    bool
	png                 string
	minCounts           []int
}

// Schedule is one timed row of part 2.
type Schedule struct {
	Name      string  `json:"name"`
	BatchSMs  int     `json:"batch_sms"`
	ShortSMs  int     `json:"short_sms"`
	ShortDone float64 `json:"short_done_ms"` // median over reps; 0 when no short job
	AllDone   float64 `json:"all_done_ms"`
}

// Report is everything the program prints.
type Report struct {
	Device    string          `json:"device"`
	Simulated bool            `json:"simulated"`
	Predicted []fcsp.SplitRow `json:"predicted_split"`
	Measured  []fcsp.SplitRow `json:"measured_split"`
	Schedules []Schedule      `json:"schedules,omitempty"`
	Sizes     map[string]int  `json:"sizes"`
	Story     string          `json:"story"` // part 0, as printed
}

func main() {
	var c config
	flag.IntVar(&c.device, "device", 0, "GPU index")
	flag.IntVar(&c.batchN, "batch-n", 4<<20, "batch job elements")
	flag.IntVar(&c.batchSteps, "batch-steps", 8192, "batch job FMA steps per element")
	flag.IntVar(&c.shortN, "short-n", 64<<10, "short job elements")
	flag.IntVar(&c.shortSteps, "short-steps", 1024, "short job FMA steps per element")
	flag.IntVar(&c.shortLaunches, "short-launches", 64, "short job launches")
	flag.IntVar(&c.reps, "reps", 5, "repetitions of each schedule (the median is reported)")
	flag.BoolVar(&c.simulate, "simulate", false, "use the simulated H200 even if a GPU is present")
	flag.BoolVar(&c.asJSON, "json", false, "print JSON instead of tables")
	flag.StringVar(&c.png, "svg", "", "also draw the schedules as bands into this SVG file")
	flag.Parse()
	c.minCounts = []int{1, 2, 4, 8, 9, 16, 24, 32, 64, 66}
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "day94: FAIL:", err)
		os.Exit(1)
	}
}

func open(ctx context.Context, c config, opts ...fcsp.Option) (*fcsp.Pool, error) {
	if c.simulate {
		return fcsp.Open(ctx, c.device, append(opts, fcsptest.SimulatedH200())...)
	}
	pool, err := fcsp.Open(ctx, c.device, opts...)
	if errors.Is(err, fcsp.ErrNoDriver) {
		fmt.Fprintf(os.Stderr, "no GPU here (%v)\nrunning the split table on a simulated H200 instead; the schedules need a GPU\n\n", err)
		return fcsp.Open(ctx, c.device, append(opts, fcsptest.SimulatedH200())...)
	}
	return pool, err
}

func run(ctx context.Context, c config) error {
	pool, err := open(ctx, c)
	if err != nil {
		return err
	}
	dev := pool.Device()
	rep := Report{Device: dev.String(), Simulated: dev.Simulated, Sizes: map[string]int{
		"batch_n": c.batchN, "batch_steps": c.batchSteps, "short_n": c.shortN, "short_steps": c.shortSteps, "short_launches": c.shortLaunches,
	}}
	var told bytes.Buffer
	if err := story(ctx, &told, pool); err != nil {
		pool.Close()
		return fmt.Errorf("part 0: %w", err)
	}
	rep.Story = told.String()
	var counts []int
	for _, m := range c.minCounts {
		if m <= dev.SMs {
			counts = append(counts, m)
		}
	}
	rep.Predicted, rep.Measured, err = pool.SplitTable(counts...)
	if err != nil {
		return err
	}
	for i := range rep.Predicted {
		if rep.Predicted[i] != rep.Measured[i] {
			return fmt.Errorf("predicted split %+v but the driver made %+v", rep.Predicted[i], rep.Measured[i])
		}
	}
	if !dev.Simulated {
		rep.Schedules, err = schedules(ctx, pool, c)
	}
	if cerr := pool.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if c.png != "" && len(rep.Schedules) > 0 {
		if err := savePlot(c.png, rep.Schedules); err != nil {
			return err
		}
	}
	if c.asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printReport(rep)
	return nil
}

func printReport(r Report) {
	fmt.Println(r.Device)
	fmt.Println()
	fmt.Print(r.Story)
	fmt.Println("\nPart 1: the split the driver is willing to make (predicted = measured)")
	fmt.Println("  asked for groups of at least minCount SMs, the driver makes this many groups of this size,")
	fmt.Println("  and leaves the remainder to whoever takes the rest (WithRestOfSMs)")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "minCount\tgroups\tSMs/group\tremainder\t")
	for _, m := range r.Measured {
		fmt.Fprintf(w, "%d\t%d\t%d\t%d\t\n", m.MinCount, m.Groups, m.GroupSMs, m.Remainder)
	}
	w.Flush()
	if len(r.Schedules) == 0 {
		fmt.Println("\nPart 2 (five schedules of one kernel on the GPU clock, checked bit for bit) needs a GPU:\n" +
			"this simulated H200's split table above is the real one's (testdata/h200-split-probe.tsv).")
		return
	}
	fmt.Printf("\nPart 2: batch %d x %d steps, short %d x %d steps launched %d times (median of reps, GPU clock)\n",
		r.Sizes["batch_n"], r.Sizes["batch_steps"], r.Sizes["short_n"], r.Sizes["short_steps"], r.Sizes["short_launches"])
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "schedule\tbatch SMs\tshort SMs\tshort done\teverything done\t")
	for _, s := range r.Schedules {
		sms := func(n int) string {
			if n == 0 {
				return "-"
			}
			return fmt.Sprint(n)
		}
		short := "-"
		if s.ShortDone > 0 {
			short = fmt.Sprintf("%.3f ms", s.ShortDone)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.3f ms\t\n", s.Name, sms(s.BatchSMs), sms(s.ShortSMs), short, s.AllDone)
	}
	w.Flush()
}

// checker compares every schedule's outputs with the first ones, bit for bit.
type checker struct{ batch, short []byte }

func (c *checker) check(name string, batch, short *workload.Job, didBatch, didShort bool) error {
	for _, x := range []struct {
		j    *workload.Job
		did  bool
		want *[]byte
	}{{batch, didBatch, &c.batch}, {short, didShort, &c.short}} {
		if !x.did {
			continue
		}
		got, err := x.j.Result()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if *x.want == nil {
			*x.want = got
		} else if i := firstDiff(*x.want, got); i >= 0 {
			return fmt.Errorf("%s: element %d differs from the alone run (bit for bit)", name, i/4)
		}
	}
	return nil
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func schedules(ctx context.Context, pool *fcsp.Pool, c config) ([]Schedule, error) {
	var out []Schedule
	var chk checker
	sms := pool.Device().SMs
	tm, err := workload.NewTimer(pool)
	if err != nil {
		return nil, err
	}
	// Unpartitioned: two tenants sharing every SM, each with its own stream.
	bt, err := pool.NewTenant("batch")
	if err != nil {
		return nil, err
	}
	st, err := pool.NewTenant("short")
	if err != nil {
		return nil, err
	}
	batch, err := workload.NewJob(ctx, bt, bt.Stream(), c.batchN, c.batchSteps, 1)
	if err != nil {
		return nil, err
	}
	short, err := workload.NewJob(ctx, st, st.Stream(), c.shortN, c.shortSteps, c.shortLaunches)
	if err != nil {
		return nil, err
	}
	// The serial schedule puts both jobs on one stream, so the short job's
	// kernel is loaded into the batch tenant too.
	shortOnBatch, err := workload.NewJob(ctx, bt, bt.Stream(), c.shortN, c.shortSteps, c.shortLaunches)
	if err != nil {
		return nil, err
	}
	type plan struct {
		name     string
		b, s     *fcsp.Stream
		bj, sj   *workload.Job
		bSM, sSM int
	}
	for _, p := range []plan{
		{"alone-batch", batch.S, nil, batch, short, sms, 0},
		{"alone-short", nil, short.S, batch, short, 0, sms},
		{"serial (one stream)", batch.S, batch.S, batch, shortOnBatch, sms, sms},
		{"shared (two streams)", batch.S, short.S, batch, short, sms, sms},
	} {
		sd, ad, err := tm.Measure(ctx, c.reps, p.bj, p.sj, p.b, p.s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		if err := chk.check(p.name, p.bj, p.sj, p.b != nil, p.s != nil); err != nil {
			return nil, err
		}
		out = append(out, Schedule{p.name, p.bSM, p.sSM, sd, ad})
	}
	bt.Close()
	st.Close()

	// Partitioned: even halves need groups of half the device; the uneven
	// exercise wants the smallest group for the short job and the rest for
	// the batch job, so it takes the device's own granularity.
	half := sms / 2 / pool.Device().Granularity * pool.Device().Granularity
	for _, lay := range []struct {
		name string
		unit int
		even bool
	}{{"partitioned (two green contexts)", half, true}, {"uneven (smallest group for short)", pool.Device().Granularity, false}} {
		p2, err := fcsp.Open(ctx, c.device, fcsp.WithPartitionUnit(lay.unit))
		if err != nil {
			return nil, err
		}
		sched, err := partitioned(ctx, p2, c, lay.name, lay.unit, lay.even, &chk)
		if cerr := p2.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lay.name, err)
		}
		out = append(out, sched)
	}
	return out, nil
}

func partitioned(ctx context.Context, pool *fcsp.Pool, c config, name string, unit int, even bool, chk *checker) (Schedule, error) {
	st, err := pool.NewTenant("short", fcsp.WithSMs(unit))
	if err != nil {
		return Schedule{}, err
	}
	bopt := fcsp.WithSMs(unit)
	if !even {
		bopt = fcsp.WithRestOfSMs()
	}
	bt, err := pool.NewTenant("batch", bopt)
	if err != nil {
		return Schedule{}, err
	}
	batch, err := workload.NewJob(ctx, bt, bt.Stream(), c.batchN, c.batchSteps, 1)
	if err != nil {
		return Schedule{}, err
	}
	short, err := workload.NewJob(ctx, st, st.Stream(), c.shortN, c.shortSteps, c.shortLaunches)
	if err != nil {
		return Schedule{}, err
	}
	tm, err := workload.NewTimer(pool)
	if err != nil {
		return Schedule{}, err
	}
	sd, ad, err := tm.Measure(ctx, c.reps, batch, short, batch.S, short.S)
	if err != nil {
		return Schedule{}, err
	}
	if err := chk.check(name, batch, short, true, true); err != nil {
		return Schedule{}, err
	}
	return Schedule{name, bt.SMs(), st.SMs(), sd, ad}, nil
}
