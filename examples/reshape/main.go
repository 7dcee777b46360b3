// Command reshape shows a tenant's SMs following its load: an interactive
// class starts with 8 SMs beside a batch class holding the rest, grows to
// 32 when its queue grows and shrinks back when the queue drains, taking
// the SMs from the batch class and giving them back (Tenant.Reshape between
// layouts built at start). It prints interactive latency (P50, P99) and
// batch throughput before, during and after the burst.
//
// On a machine without a GPU it runs on the simulated H200: the SM counts
// and switches are the SDK's real logic, but kernels run on the CPU, so the
// latency and throughput columns mean something only on a GPU.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/examples/workload"
	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
)

func main() {
	sim := flag.Bool("sim", false, "use the simulated H200 even where there is a GPU")
	phase := flag.Duration("phase", 2*time.Second, "length of each phase (before, burst, after)")
	calm := flag.Duration("calm", 2*time.Millisecond, "time between interactive requests outside the burst")
	burst := flag.Duration("burst", 100*time.Microsecond, "time between interactive requests in the burst")
	grow := flag.Int("grow", 4, "queue length at which the interactive class grows")
	flag.Parse()
	if err := run(*sim, *phase, *calm, *burst, *grow); err != nil {
		log.Fatal(err)
	}
}

type sample struct {
	phase int
	lat   time.Duration
}

func run(sim bool, phase, calm, burst time.Duration, grow int) error {
	ctx := context.Background()
	var opts []fcsp.Option
	if sim {
		opts = append(opts, fcsptest.SimulatedH200())
	}
	pool, err := fcsp.Open(ctx, 0, opts...)
	if err != nil && !sim {
		pool, err = fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
	}
	if err != nil {
		return err
	}
	defer pool.Close()
	simulated := pool.Device().Simulated
	fmt.Println(pool.Device())
	small, big := 8, 32
	lat, err := pool.NewTenant("interactive", fcsp.WithSMs(small), fcsp.WithReshapeSizes(big))
	if err != nil {
		return err
	}
	defer lat.Close()
	batch, err := pool.NewTenant("batch", fcsp.WithRestOfSMs())
	if err != nil {
		return err
	}
	full := batch.SMs()
	if err := batch.Close(); err != nil {
		return err
	}
	if batch, err = pool.NewTenant("batch", fcsp.WithRestOfSMs(), fcsp.WithReshapeSizes(full-(big-small))); err != nil {
		return err
	}
	defer batch.Close()
	fmt.Printf("interactive %d SMs (may grow to %d), batch %d SMs (may shrink to %d)\n", lat.SMs(), big, batch.SMs(), full-(big-small))

	// Kernel sizes: an interactive request is sized so that 8 SMs serve
	// the calm rate easily but not the burst (about 0.3 ms of 8 SMs each:
	// some 3,000 requests/s, against the burst's 5,000-10,000), so the
	// queue grows; 32 SMs serve the burst. On the simulator the fake runs
	// them on the CPU.
	ln, lsteps, bn, bsteps := 1<<20, 512, 1<<22, 1024
	if simulated {
		ln, lsteps, bn, bsteps = 256, 16, 4096, 16
	}
	bjob, err := workload.NewJob(ctx, batch, batch.Stream(), bn, bsteps, 4)
	if err != nil {
		return err
	}
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
	var mu sync.Mutex
	var samples []sample
	var sizes [3][]int
	for w := 0; w < 4; w++ {
		s, err := lat.NewStream(fcsp.ClassDefault)
		if err != nil {
			return err
		}
		job, err := workload.NewJob(ctx, lat, s, ln, lsteps, 1)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range queue {
				if err := job.Submit(ctx, s); err == nil {
					err = s.Synchronize()
				} else {
					log.Print("interactive: ", err)
				}
				mu.Lock()
				samples = append(samples, sample{r.phase, time.Since(r.at)})
				mu.Unlock()
			}
		}()
	}
	// The controller: grow when the queue passes grow, shrink once it has
	// been empty for 20 ms.
	ctlDone := make(chan struct{})
	var switches []string
	go func() {
		defer close(ctlDone)
		var emptySince time.Time
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
			case q >= grow && lat.SMs() == small:
				t0 := time.Now()
				err := batch.Reshape(ctx, full-(big-small))
				if err == nil {
					err = lat.Reshape(ctx, big)
				}
				switches = append(switches, fmt.Sprintf("grow at queue %d: %v (%v)", q, time.Since(t0).Round(time.Microsecond), err))
			case q == 0 && lat.SMs() == big:
				if emptySince.IsZero() {
					emptySince = time.Now()
				} else if time.Since(emptySince) > 20*time.Millisecond {
					t0 := time.Now()
					err := lat.Reshape(ctx, small)
					if err == nil {
						err = batch.Reshape(ctx, full)
					}
					switches = append(switches, fmt.Sprintf("shrink when drained: %v (%v)", time.Since(t0).Round(time.Microsecond), err))
					emptySince = time.Time{}
				}
			default:
				emptySince = time.Time{}
			}
		}
	}()
	names := [3]string{"before", "burst", "after"}
	for p, gap := range []time.Duration{calm, burst, calm} {
		phaseNow.Store(int32(p))
		end := time.Now().Add(phase)
		// The burst sends four requests a tick: a sleep of 100 us lasts
		// some 300 us on Linux, so one a tick would not outrun 8 SMs
		// (seen on the H200: the queue never passed the threshold).
		per := 1
		if p == 1 {
			per = 4
		}
		for time.Now().Before(end) {
			for range per {
				queue <- req{time.Now(), p}
			}
			time.Sleep(gap)
		}
	}
	close(queue)
	close(stop)
	wg.Wait()
	<-ctlDone
	for _, s := range switches {
		fmt.Println(s)
	}
	fmt.Printf("\n%-7s %-16s %9s %10s %10s %14s\n", "phase", "interactive SMs", "requests", "P50", "P99", "batch FMA/s")
	for p, name := range names {
		var d []time.Duration
		for _, s := range samples {
			if s.phase == p {
				d = append(d, s.lat)
			}
		}
		slices.Sort(d)
		p50, p99 := time.Duration(0), time.Duration(0)
		if len(d) > 0 {
			p50, p99 = d[len(d)/2], d[len(d)*99/100]
		}
		fmt.Printf("%-7s %-16s %9d %10v %10v %14.4g\n", name, span(sizes[p]), len(d), p50.Round(time.Microsecond), p99.Round(time.Microsecond),
			float64(batchWork[p].Load())/phase.Seconds())
	}
	if simulated {
		fmt.Println("\nsimulated device: the SM counts and switches are real, the latencies and throughput are the fake's CPU time; run on a GPU for those")
	}
	return nil
}

// span is "8" or "8-32": the SM counts seen in a phase.
func span(s []int) string {
	if len(s) == 0 {
		return "-"
	}
	lo, hi := slices.Min(s), slices.Max(s)
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}
