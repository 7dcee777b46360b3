// Package workload is the day-94 experiment's moving parts, shared by the
// examples that run it (examples/day94, throttle, server) and the benchmark
// harness (cmd/bench): a job of package kernels' chain bound to a tenant,
// and a timer that measures a schedule of a batch job and short jobs on the
// GPU clock. It uses fcsp's public API only, so an example copied out of
// this repository takes it along. (It is not under examples/internal
// because cmd/bench, outside examples/, uses it too.)
package workload

import (
	"bytes"
	"context"
	"slices"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// Job is a workload of the chain kernel: n elements of steps dependent FMAs,
// launched Launches times, with its output buffer on a tenant.
type Job struct {
	T        *fcsp.Tenant
	S        *fcsp.Stream // the stream it runs on by default
	fn       *fcsp.Function
	buf      fcsp.DevicePtr
	N, Steps int
	Launches int
	args     fcsp.Args
}

// Kernel loads package kernels' PTX into t and returns
// the one called name ("chain" or "spin").
func Kernel(t *fcsp.Tenant, name string) (*fcsp.Function, error) {
	mod, err := t.LoadModule(kernels.ChainPTX)
	if err != nil {
		return nil, err
	}
	return mod.Function(name)
}

// NewJob loads the kernel into t and allocates the job's output.
func NewJob(ctx context.Context, t *fcsp.Tenant, s *fcsp.Stream, n, steps, launches int) (*Job, error) {
	fn, err := Kernel(t, "chain")
	if err != nil {
		return nil, err
	}
	buf, err := t.Alloc(ctx, uint64(4*n))
	if err != nil {
		return nil, err
	}
	j := &Job{T: t, S: s, fn: fn, buf: buf, N: n, Steps: steps, Launches: launches}
	j.args.Ptr(buf).Int32(int32(n)).Int32(int32(steps))
	return j, nil
}

// Submit queues the job's launches on stream on.
func (j *Job) Submit(ctx context.Context, on *fcsp.Stream) error {
	grid, block := fcsp.Dim3{X: uint32((j.N + 255) / 256), Y: 1, Z: 1}, fcsp.Dim3{X: 256, Y: 1, Z: 1}
	for range j.Launches {
		if err := on.Launch(ctx, j.fn, grid, block, 0, &j.args); err != nil {
			return err
		}
	}
	return nil
}

// Result copies the output back, checks it against the closed form, and
// poisons the buffer so that the next run must write every element again.
func (j *Job) Result() ([]byte, error) {
	out := make([]byte, 4*j.N)
	if err := j.T.CopyFromDevice(out, j.buf); err != nil {
		return nil, err
	}
	if err := kernels.CheckChain(out, j.Steps); err != nil {
		return nil, err
	}
	return out, j.T.CopyToDevice(j.buf, bytes.Repeat([]byte{0xff}, 4*j.N))
}

// Timer holds the three events of a schedule: start, short jobs done,
// everything done.
type Timer struct{ start, short, all *fcsp.Event }

// NewTimer makes the events in the pool's primary context.
func NewTimer(pool *fcsp.Pool) (*Timer, error) {
	var t Timer
	for _, e := range []**fcsp.Event{&t.start, &t.short, &t.all} {
		var err error
		if *e, err = pool.NewEvent(); err != nil {
			return nil, err
		}
	}
	return &t, nil
}

// Close destroys the events.
func (t *Timer) Close() {
	t.start.Close()
	t.short.Close()
	t.all.Close()
}

// Measure runs one schedule reps times, batch on bOn and short on sOn
// (either may be nil), and returns the median times in ms until the short
// jobs finished and until everything did, on the GPU clock: the events are
// recorded on the primary context's NULL stream after the host waited for
// each stream, as the day-94 C++ reference does.
func (t *Timer) Measure(ctx context.Context, reps int, batch, short *Job, bOn, sOn *fcsp.Stream) (shortMs, allMs float64, err error) {
	var shorts, alls []float64
	for range reps {
		if err := t.start.Record(nil); err != nil {
			return 0, 0, err
		}
		if bOn != nil {
			if err := batch.Submit(ctx, bOn); err != nil {
				return 0, 0, err
			}
		}
		if sOn != nil {
			if err := short.Submit(ctx, sOn); err != nil {
				return 0, 0, err
			}
			if err := sOn.Synchronize(); err != nil {
				return 0, 0, err
			}
		}
		if err := t.short.Record(nil); err != nil {
			return 0, 0, err
		}
		if bOn != nil {
			if err := bOn.Synchronize(); err != nil {
				return 0, 0, err
			}
		}
		if err := t.all.Record(nil); err != nil {
			return 0, 0, err
		}
		if err := t.all.Synchronize(); err != nil {
			return 0, 0, err
		}
		s, err := t.short.Since(t.start)
		if err != nil {
			return 0, 0, err
		}
		a, err := t.all.Since(t.start)
		if err != nil {
			return 0, 0, err
		}
		shorts, alls = append(shorts, Ms(s)), append(alls, Ms(a))
	}
	if sOn == nil {
		return 0, Median(alls), nil
	}
	return Median(shorts), Median(alls), nil
}

// Ms is d in milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Median of v (v is not modified).
func Median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}
