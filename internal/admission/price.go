package admission

import (
	"github.com/fcsp-go/fcsp-go/stream"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// What a tenant's limit charges: its pricer, chosen once in NewTenant.
// A launch-rate limit (WithSMLimit) charges a kernel's threads; a GPU
// share (WithGPUShare) charges predicted GPU time, corrected once the work
// is measured, and with a bandwidth floor more while a latency tenant is
// busy (floor.go); a tenant with neither charges nothing. The pricer also
// owns the limit's token buckets (a tokenbucket.Limiter): the streams'
// and the one Do is admitted on.
type pricer interface {
	// price is j's price at the limit now: the part its measurement
	// corrects, the part it does not, and a floor's surcharge. Three
	// floats, not a charge: a struct returned and copied on is read back
	// wide from its narrow stores, a store-forwarding stall (~10 ns) on
	// every launch.
	price(j job) (measured, fixed, floor float64)
	// rate is the launch-rate model's price of launches of threads
	// threads in all on a stream of class cl: 0 under other limits.
	rate(cl stream.Class, threads float64) float64
	// stream makes the bucket of a stream of class cl; nil: its work is
	// admitted free.
	stream(cl stream.Class) (*tokenbucket.Stream, error)
	// doStream makes the bucket Do is admitted on (closed at once if h's
	// tenant is closing: its limiter's Close may have missed it); nil:
	// Do is not limited.
	doStream(h Host) (*tokenbucket.Stream, error)
	// freeDo reports whether a Do is admitted free now.
	freeDo() bool
	// limiter is the limit's limiter; nil: none.
	limiter() *tokenbucket.Limiter
	// setSMs follows a tenant's new SM count.
	setSMs(n int) error
	// stats is the limit's figures, with what dm's bucket counted (dm:
	// the Do meter, if made). A value: a pointer into the caller's stack
	// would escape through the interface, garbage for every Stats.
	stats(dm *doMeter) limitStats
	// close closes the limiter: admissions waiting for tokens end.
	close()
}

// unlimited is the pricer of a tenant with no limit: its streams' work
// and its Dos are admitted free.
type unlimited struct{}

func (unlimited) price(job) (float64, float64, float64)            { return 0, 0, 0 }
func (unlimited) rate(stream.Class, float64) float64               { return 0 }
func (unlimited) stream(stream.Class) (*tokenbucket.Stream, error) { return nil, nil }
func (unlimited) doStream(Host) (*tokenbucket.Stream, error)       { return nil, nil }
func (unlimited) freeDo() bool                                     { return true }
func (unlimited) limiter() *tokenbucket.Limiter                    { return nil }
func (unlimited) setSMs(int) error                                 { return nil }
func (unlimited) stats(*doMeter) limitStats                        { return limitStats{} }
func (unlimited) close()                                           {}

// limited is what both limits share: their limiter, and a bucket per
// stream of a class that does not bypass it (NCCL's does).
type limited struct{ l *tokenbucket.Limiter }

func (p limited) stream(cl stream.Class) (*tokenbucket.Stream, error) {
	if cl.Bypass() {
		return nil, nil
	}
	return p.l.NewStream(1)
}

func (p limited) limiter() *tokenbucket.Limiter { return p.l }
func (p limited) close()                        { _ = p.l.Close() }

// launchRate prices by the launch-rate model: a launch's threads,
// dampened and, below limit 1, penalised (tokenbucket.Limiter.Cost). Its
// prices are not corrected, and it limits launches only: Do, whose
// kernels it cannot see, is admitted free.
type launchRate struct{ limited }

// newLaunchRate is the pricer of cfg's launch-rate limit.
func newLaunchRate(cfg *Config) (launchRate, error) {
	l, err := tokenbucket.New(tokenbucket.Config{
		SMs: cfg.SMs, ThreadsPerSM: cfg.ThreadsPerSM, SMLimit: cfg.SMLimit,
		Dampening: cfg.Dampening, Penalty: cfg.Penalty, RefillPeriod: cfg.Refill, Clock: cfg.Clock,
	})
	return launchRate{limited{l}}, err
}

func (p launchRate) price(j job) (measured, fixed, floor float64) {
	return 0, p.rate(j.class, j.threads), 0
}

func (p launchRate) rate(cl stream.Class, threads float64) float64 {
	return p.l.ThreadsCost(threads, cl)
}

func (launchRate) doStream(Host) (*tokenbucket.Stream, error) { return nil, nil }
func (launchRate) freeDo() bool                               { return true }
func (p launchRate) setSMs(n int) error                       { return p.l.SetSMs(n) }
func (p launchRate) stats(*doMeter) limitStats                { return limitStats{smLimit: p.l.SMLimit()} }

// gpuTime prices by predicted GPU time under a GPU share: the work's
// running estimate (one refill period before its first measurement),
// scaled by its stream's class, corrected by the difference once it is
// measured. Its tokens are nanoseconds of the device's time, whatever the
// tenant's SMs.
type gpuTime struct{ limited }

// newGPUTime is the pricer of cfg's GPU share.
func newGPUTime(cfg *Config) (gpuTime, error) {
	refill := cfg.Refill
	if refill == 0 {
		refill = tokenbucket.DefaultRefillPeriod
	}
	l, err := tokenbucket.New(tokenbucket.Config{
		SMs: 1, ThreadsPerSM: int(refill.Nanoseconds()), SMLimit: cfg.GPUShare, RefillPeriod: refill,
		Dampening: 1, Penalty: tokenbucket.NoPenalty, Clock: cfg.Clock,
	})
	return gpuTime{limited{l}}, err
}

// price is j's predicted time. At share 1 it is 0, admitted without
// touching the buckets: a share of the whole device is no limit, and a
// bucket charged at submission for time the GPU spends later would hold a
// full-share tenant back by the work it has queued (on the H200 a 1 ms
// kernel at share 1 left the GPU 11% idle after each Synchronize, while
// the bucket refilled the debt of what had been queued).
func (p gpuTime) price(j job) (measured, fixed, floor float64) {
	if p.l.SMLimit() >= 1 {
		return 0, 0, 0
	}
	return p.predicted(j), 0, 0
}

// predicted is j's GPU time scaled by its stream's class, whatever the
// share: a whole refill period before the first measurement.
func (p gpuTime) predicted(j job) float64 {
	ns := j.est.get()
	if ns == 0 {
		ns = p.l.Capacity()
	}
	return ns * j.class.ThrottleScale()
}

func (gpuTime) rate(stream.Class, float64) float64 { return 0 }

func (p gpuTime) doStream(h Host) (*tokenbucket.Stream, error) {
	b, err := p.l.NewStream(1)
	if err != nil {
		return nil, err
	}
	// The limiter closes the buckets it lists when the tenant closes;
	// one made after that Close began is closed here.
	if h.Closed() {
		_ = b.Close()
	}
	return b, nil
}

func (p gpuTime) freeDo() bool   { return p.l.SMLimit() >= 1 } // see price
func (gpuTime) setSMs(int) error { return nil }                // a share of the device's time, whatever the SMs

func (p gpuTime) stats(dm *doMeter) limitStats {
	ls := limitStats{gpuShare: p.l.SMLimit()}
	if dm != nil {
		ls.do = dm.bucket.Stats()
	}
	return ls
}

// limitStats is a pricer's figures (pricer.stats).
type limitStats struct {
	smLimit, gpuShare float64
	do                tokenbucket.Stats // the Do bucket's
}

// charge is a price (quote), and once taken what one admission took from
// its bucket, kept until its work is measured (settle) or did not run
// (cancel): what was taken, and under which limit, as x/time/rate's
// Reservation keeps.
type charge struct {
	measured float64          // corrected by the measured cost: a GPU share's predicted time
	fixed    float64          // not corrected: a launch-rate price, a graph's set cost
	floor    float64          // a floor's surcharge (floor.go): not corrected
	mark     tokenbucket.Mark // when it was priced, then the bucket's parameters it was taken under (tokenbucket.Mark)
}

func (c *charge) total() float64 { return c.measured + c.fixed + c.floor }

// settle corrects b by the difference between the measured cost (tokens)
// of c's work and what c was charged for it. Settled at the worth of the
// charge: a share lowered since scales what is given back as it scaled
// the tokens in hand.
func (c *charge) settle(b *tokenbucket.Stream, tokens float64) {
	if c.measured > 0 {
		b.AdjustSince(tokens-c.measured, c.mark)
	}
}

// cancel gives back to b what c took: its work did not run. The caller
// has seen c.total() > 0.
func (c *charge) cancel(b *tokenbucket.Stream) {
	b.AdjustSince(-c.total(), c.mark)
	c.measured, c.fixed, c.floor = 0, 0, 0
}

// quote sets *c to j's price under p, dated by b's mark (taken first: a
// change of share after it makes a wait on the price stale,
// tokenbucket.Waiting). The charge then dates the mark to the parameters
// it was taken under (tokenbucket.Mark), which what it gives back is
// carried from. Field by field, for the reason price gives.
func quote(p pricer, b *tokenbucket.Stream, j job, c *charge) {
	c.mark = b.Mark()
	if j.fixed != 0 {
		// As the caller set it (GraphExec.SetCost): not corrected, and
		// not raised at a floor.
		c.measured, c.fixed, c.floor = 0, j.fixed, 0
		return
	}
	c.measured, c.fixed, c.floor = p.price(j)
}
