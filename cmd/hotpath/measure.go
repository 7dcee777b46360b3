package main

import (
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/benchstat"
)

// figure is one round's result for one target at one goroutine count.
type figure struct {
	P50     float64 `json:"p50_ns"`
	P99     float64 `json:"p99_ns"`
	Wall    float64 `json:"wall_ns"` // wall time / calls, all goroutines together
	Refused int     `json:"refused,omitempty"`
}

// measure runs calls timed calls of t split among g goroutines, after an
// untimed warm-up of a tenth as many, on fresh state.
func measure(t target, g, calls int) (figure, error) {
	op, done, err := t.setup(g)
	if err != nil {
		return figure{}, err
	}
	if done != nil {
		defer done()
	}
	per := max(calls/g, 1)
	samples := make([][]float64, g)
	errs := make([]error, g)
	refusals := make([]int, g)
	var ready, wg sync.WaitGroup
	startGate := make(chan struct{})
	ready.Add(g)
	wg.Add(g)
	for k := 0; k < g; k++ {
		go func(k int) {
			defer wg.Done()
			s := make([]float64, per)
			for i := 0; i < per/10; i++ { // warm-up: caches, leases, first chunks
				if err := op(k, i); err != nil && err != errRefused {
					errs[k] = err
					ready.Done()
					return
				}
			}
			ready.Done()
			<-startGate
			for i := range s {
				t0 := time.Since(base)
				err := op(k, per/10+i)
				s[i] = float64(time.Since(base) - t0)
				if err == errRefused {
					refusals[k]++
				} else if err != nil {
					errs[k] = err
					return
				}
			}
			samples[k] = s
		}(k)
	}
	ready.Wait()
	runtime.GC() // no collection of the setup's garbage inside the timed part
	t0 := time.Now()
	close(startGate)
	wg.Wait()
	wall := time.Since(t0)
	for _, err := range errs {
		if err != nil {
			return figure{}, err
		}
	}
	var nref int
	for _, n := range refusals {
		nref += n
	}
	all := make([]float64, 0, per*g)
	for _, s := range samples {
		all = append(all, s...)
	}
	slices.Sort(all)
	return figure{
		P50:     benchstat.Percentile(all, 50),
		P99:     benchstat.Percentile(all, 99),
		Wall:    float64(wall) / float64(len(all)),
		Refused: nref,
	}, nil
}

// spread is the median and range of one figure over the rounds.
type spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{math.NaN(), math.NaN(), math.NaN()}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{Median: m, Min: s[0], Max: s[len(s)-1]}
}

type cell struct {
	Goroutines int      `json:"goroutines"`
	Rounds     []figure `json:"rounds"`
	P50        spread   `json:"p50_ns"`
	P99        spread   `json:"p99_ns"`
	Wall       spread   `json:"wall_ns"`
}

func (c *cell) summarise() {
	var p50, p99, wall []float64
	for _, f := range c.Rounds {
		p50 = append(p50, f.P50)
		p99 = append(p99, f.P99)
		wall = append(wall, f.Wall)
	}
	c.P50, c.P99, c.Wall = spreadOf(p50), spreadOf(p99), spreadOf(wall)
}
