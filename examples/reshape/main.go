// Command reshape shows a tenant's SMs following its load: an interactive
// class starts with 8 SMs beside a batch class holding the rest, grows to
// 32 when its queue grows and shrinks back when the queue drains, taking
// the SMs from the batch class and giving them back (Tenant.Reshape between
// layouts built at start). It prints interactive latency (P50, P99) and
// batch throughput before, during and after the burst, the SMs the
// interactive class held in each phase and when it grew and shrank.
//
// On a machine without a GPU it runs on the simulated H200. The SM counts
// and the switches there are the SDK's real logic, but the fake driver runs
// kernels on the CPU at one speed whatever the SMs, so growing would change
// nothing and the queue would follow the host's load. So on the simulator
// each request and batch job also takes a modelled time proportional to
// 1/SMs (a request 500 us on 8 SMs, 125 us on 32), and requests arrive on
// a fixed schedule (500/s calm, 4,000/s in the burst: more than 8 SMs
// serve, less than 32 do). The latencies and throughput it prints are that
// model's, and it says so; on a GPU they are measured.
//
// Requests still queued when the last phase ends are dropped and counted,
// so the run lasts its three phases.
//
//	go run ./examples/reshape                  # GPU if present, else the simulator
//	go run ./examples/reshape -phase 500ms -sim
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/examples/workload"
	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
)

func main() {
	var c config
	flag.BoolVar(&c.sim, "sim", false, "use the simulated H200 even where there is a GPU")
	flag.DurationVar(&c.phase, "phase", 2*time.Second, "length of each phase (before, burst, after)")
	flag.DurationVar(&c.calm, "calm", 2*time.Millisecond, "time between interactive requests outside the burst")
	flag.DurationVar(&c.burst, "burst", 0, "time between interactive requests in the burst (default: 100us, four a tick, on a GPU; 250us on the simulator)")
	flag.IntVar(&c.grow, "grow", 4, "queue length at which the interactive class grows")
	flag.Parse()
	rep, err := run(context.Background(), os.Stdout, c)
	if err != nil {
		log.Fatal(err)
	}
	rep.write(os.Stdout)
}

type config struct {
	sim                bool
	phase, calm, burst time.Duration
	grow               int
}

// The interactive class's two sizes.
const small, big = 8, 32

// The simulator's model: a request takes simRequest on small SMs, a batch
// job simBatch on the batch class's full SMs, each scaled by 1/SMs.
const (
	simRequest = 500 * time.Microsecond
	simBurst   = 250 * time.Microsecond
	simBatch   = 2 * time.Millisecond
	simLead    = 2 * time.Millisecond // how far the interactive workers may run ahead of the model
)

// Phase is what one phase saw.
type Phase struct {
	Name         string
	MinSMs       int           // the fewest SMs the interactive class held
	MaxSMs       int           // the most
	EndSMs       int           // what it held when the phase ended
	AtBig        float64       // fraction of the phase's samples at 32 SMs
	Requests     int           // interactive requests served
	P50, P99     time.Duration // their latency, from when each was queued
	BatchFMAPerS float64
}

// Report is the run's outcome.
type Report struct {
	Simulated bool
	Switches  []string
	Phases    [3]Phase
	Dropped   int // requests still queued when the last phase ended
}

type sample struct {
	phase int
	lat   time.Duration
}

// simPartition models, on the simulator, how long a partition takes to
// serve work: one unit after another, each work x ref/SMs, as a
// partition's SMs serve its streams' kernels. A unit ends at a modelled
// time; the caller sleeps until lead before it, so that what it has not yet
// taken stays in its queue. (Go sleeps at least about a millisecond on an
// idle Linux host, so sub-millisecond service times cannot be slept one
// by one.)
type simPartition struct {
	mu   sync.Mutex
	busy time.Time
}

func (p *simPartition) serve(work time.Duration, ref, sms int, lead time.Duration) (end time.Time) {
	d := work * time.Duration(ref) / time.Duration(sms)
	p.mu.Lock()
	start := time.Now()
	if p.busy.After(start) {
		start = p.busy
	}
	p.busy = start.Add(d)
	end = p.busy
	p.mu.Unlock()
	if wait := time.Until(end) - lead; wait > 0 {
		time.Sleep(wait)
	}
	return end
}

func run(ctx context.Context, w io.Writer, c config) (Report, error) {
	var opts []fcsp.Option
	if c.sim {
		opts = append(opts, fcsptest.SimulatedH200())
	}
	pool, err := fcsp.Open(ctx, 0, opts...)
	if err != nil && !c.sim {
		pool, err = fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
	}
	if err != nil {
		return Report{}, err
	}
	defer pool.Close()
	simulated := pool.Device().Simulated
	rep := Report{Simulated: simulated}
	per := 1 // requests a tick in the burst
	if c.burst == 0 {
		// On a GPU the burst sends four requests a tick: a sleep of 100 us
		// lasts some 300 us on Linux, so one a tick would not outrun 8 SMs
		// (seen on the H200: the queue never passed the threshold). The
		// simulator sends on a schedule instead.
		c.burst, per = 100*time.Microsecond, 4
		if simulated {
			c.burst, per = simBurst, 1
		}
	}
	fmt.Fprintln(w, pool.Device())
	lat, err := pool.NewTenant("interactive", fcsp.WithSMs(small), fcsp.WithReshapeSizes(big))
	if err != nil {
		return rep, err
	}
	defer lat.Close()
	batch, err := pool.NewTenant("batch", fcsp.WithRestOfSMs())
	if err != nil {
		return rep, err
	}
	full := batch.SMs()
	if err := batch.Close(); err != nil {
		return rep, err
	}
	if batch, err = pool.NewTenant("batch", fcsp.WithRestOfSMs(), fcsp.WithReshapeSizes(full-(big-small))); err != nil {
		return rep, err
	}
	defer batch.Close()
	fmt.Fprintf(w, "interactive %d SMs (may grow to %d), batch %d SMs (may shrink to %d); three phases of %v\n",
		lat.SMs(), big, batch.SMs(), full-(big-small), c.phase)
	if simulated {
		fmt.Fprintf(w, "simulated: each request takes %v x %d/SMs, each batch job %v x %d/SMs (a model: the fake runs kernels on the CPU)\n",
			simRequest, small, simBatch, full)
	}

	// Kernel sizes: an interactive request is sized so that 8 SMs serve
	// the calm rate easily but not the burst (about 0.3 ms of 8 SMs each:
	// some 3,000 requests/s, against the burst's 5,000-10,000), so the
	// queue grows; 32 SMs serve the burst. On the simulator the fake runs
	// small ones on the CPU and the model gives them their time.
	ln, lsteps, bn, bsteps := 1<<20, 512, 1<<22, 1024
	if simulated {
		ln, lsteps, bn, bsteps = 256, 16, 4096, 16
	}
	bjob, err := workload.NewJob(ctx, batch, batch.Stream(), bn, bsteps, 4)
	if err != nil {
		return rep, err
	}
	var latSim, batchSim simPartition
	var phaseNow atomic.Int32
	var batchWork [3]atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // batch: back-to-back launches
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := bjob.Submit(ctx, batch.Stream()); err != nil {
				log.Print("batch: ", err)
				return
			}
			if err := batch.Stream().Synchronize(); err != nil {
				log.Print("batch: ", err)
				return
			}
			if simulated {
				batchSim.serve(simBatch, full, batch.SMs(), 0)
			}
			batchWork[phaseNow.Load()].Add(int64(bn) * int64(bsteps) * 4)
		}
	}()

	// Interactive: requests queue up and four workers serve them, each on
	// a stream of its own.
	type req struct {
		at    time.Time
		phase int
	}
	queue := make(chan req, 1<<16)
	var over atomic.Bool // the last phase has ended: drop what is queued
	var dropped atomic.Int64
	var mu sync.Mutex
	var samples []sample
	for range 4 {
		s, err := lat.NewStream(fcsp.ClassDefault)
		if err != nil {
			return rep, err
		}
		job, err := workload.NewJob(ctx, lat, s, ln, lsteps, 1)
		if err != nil {
			return rep, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range queue {
				if over.Load() {
					dropped.Add(1)
					continue
				}
				if err := job.Submit(ctx, s); err == nil {
					err = s.Synchronize()
				} else {
					log.Print("interactive: ", err)
				}
				done := time.Now()
				if simulated { // the model's end, up to simLead ahead
					done = latSim.serve(simRequest, small, lat.SMs(), simLead)
				}
				mu.Lock()
				samples = append(samples, sample{r.phase, done.Sub(r.at)})
				mu.Unlock()
			}
		}()
	}
	// The controller: grow when the queue passes grow, shrink once it has
	// been empty for 20 ms. A queue empty at 32 SMs may still be more than
	// 8 serve, so a grow soon after a shrink doubles the wait before the
	// next shrink (up to 320 ms or a quarter phase), and a calm stretch
	// resets it.
	ctlDone := make(chan struct{})
	var sizes [3][]int
	go func() {
		defer close(ctlDone)
		minWait, maxWait := 20*time.Millisecond, min(320*time.Millisecond, c.phase/4)
		var emptySince, shrunkAt time.Time
		wait := minWait
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Microsecond):
			}
			q := len(queue)
			p := int(phaseNow.Load())
			sizes[p] = append(sizes[p], lat.SMs())
			switch {
			case q >= c.grow && lat.SMs() == small:
				t0 := time.Now()
				if t0.Sub(shrunkAt) < 2*wait {
					wait = min(2*wait, maxWait)
				} else {
					wait = minWait
				}
				err := batch.Reshape(ctx, full-(big-small))
				if err == nil {
					err = lat.Reshape(ctx, big)
				}
				rep.Switches = append(rep.Switches, fmt.Sprintf("%-7s grow at queue %d: %v (%v)", names[p], q, time.Since(t0).Round(time.Microsecond), err))
			case q == 0 && lat.SMs() == big:
				if emptySince.IsZero() {
					emptySince = time.Now()
				} else if time.Since(emptySince) > wait {
					t0 := time.Now()
					shrunkAt = t0
					err := lat.Reshape(ctx, small)
					if err == nil {
						err = batch.Reshape(ctx, full)
					}
					rep.Switches = append(rep.Switches, fmt.Sprintf("%-7s shrink when drained for %v: %v (%v)", names[p], wait, time.Since(t0).Round(time.Microsecond), err))
					emptySince = time.Time{}
				}
			default:
				emptySince = time.Time{}
			}
		}
	}()
	var endSMs [3]int
	for p, gap := range []time.Duration{c.calm, c.burst, c.calm} {
		phaseNow.Store(int32(p))
		n := 1
		if p == 1 {
			n = per
		}
		end := time.Now().Add(c.phase)
		if simulated { // on a schedule, catching up after a late wake
			for next := time.Now(); next.Before(end); next = next.Add(gap) {
				time.Sleep(time.Until(next))
				queue <- req{time.Now(), p}
			}
		} else {
			for time.Now().Before(end) {
				for range n {
					queue <- req{time.Now(), p}
				}
				time.Sleep(gap)
			}
		}
		endSMs[p] = lat.SMs()
	}
	over.Store(true)
	close(queue)
	close(stop)
	wg.Wait()
	<-ctlDone
	rep.Dropped = int(dropped.Load())
	for p, name := range names {
		var d []time.Duration
		for _, s := range samples {
			if s.phase == p {
				d = append(d, s.lat)
			}
		}
		slices.Sort(d)
		ph := Phase{Name: name, EndSMs: endSMs[p], Requests: len(d),
			BatchFMAPerS: float64(batchWork[p].Load()) / c.phase.Seconds()}
		if len(d) > 0 {
			ph.P50, ph.P99 = d[len(d)/2], d[len(d)*99/100]
		}
		if len(sizes[p]) > 0 {
			ph.MinSMs, ph.MaxSMs = slices.Min(sizes[p]), slices.Max(sizes[p])
			n := 0
			for _, s := range sizes[p] {
				if s == big {
					n++
				}
			}
			ph.AtBig = float64(n) / float64(len(sizes[p]))
		}
		rep.Phases[p] = ph
	}
	return rep, nil
}

var names = [3]string{"before", "burst", "after"}

func (r Report) write(w io.Writer) {
	const first, last = 4, 2 // the switches shown
	for i, s := range r.Switches {
		if n := len(r.Switches) - first - last; i == first && n > 1 {
			fmt.Fprintf(w, "... %d more switches\n", n)
		}
		if i < first || i >= len(r.Switches)-last || len(r.Switches) <= first+last+1 {
			fmt.Fprintln(w, s)
		}
	}
	fmt.Fprintf(w, "\n%-7s %8s %6s %8s %9s %10s %10s %14s\n", "phase", "SMs seen", "at end", "at 32", "requests", "P50", "P99", "batch FMA/s")
	for _, p := range r.Phases {
		seen := fmt.Sprint(p.MinSMs)
		if p.MaxSMs != p.MinSMs {
			seen = fmt.Sprintf("%d-%d", p.MinSMs, p.MaxSMs)
		}
		fmt.Fprintf(w, "%-7s %8s %6d %7.0f%% %9d %10v %10v %14.4g\n", p.Name, seen, p.EndSMs, 100*p.AtBig, p.Requests,
			p.P50.Round(time.Microsecond), p.P99.Round(time.Microsecond), p.BatchFMAPerS)
	}
	if r.Dropped > 0 {
		fmt.Fprintf(w, "requests still queued when the last phase ended, dropped: %d\n", r.Dropped)
	}
	if r.Simulated {
		fmt.Fprintln(w, "\nsimulated device: the SM counts and switches are the SDK's; the latencies and batch throughput are the model's\n"+
			"(a partition's speed proportional to its SMs) plus this host's delays, not a GPU's: run on a GPU for those")
	}
}
