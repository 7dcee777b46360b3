package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// The admission table (issue 19): one goroutine, each path timed over
// blocks of calls (not call by call, whose own clock read would hide a
// difference of a few ns), the rows alternating block by block so that all
// see the same load; a round's figure is a path's median block. Each
// round's ratio is taken against the clock+CAS floor of the same round.

const admissionBlock = 256

type admissionPath struct {
	name string
	// setup returns the call to time; it returns false if it refused.
	setup func() (func() bool, error)
}

const floorPath = "floor: clock + CAS, one word"

func admissionPaths() []admissionPath {
	// An H200's limiter at SMLimit 1 and the default refill period never
	// refuses at one goroutine's pace: the launch path itself is timed, not
	// the rate. With a 1 ns refill period (the burst is 1 ns of tokens) no
	// lease outlasts a launch: the worst case for leases.
	streamOf := func(share float64, refill time.Duration) (*tokenbucket.Stream, error) {
		l, err := tokenbucket.New(tokenbucket.Config{SMs: 132, ThreadsPerSM: 2048, SMLimit: 1, RefillPeriod: refill})
		if err != nil {
			return nil, err
		}
		return l.NewStream(share)
	}
	stream := func(share float64) (*tokenbucket.Stream, error) { return streamOf(share, time.Millisecond) }
	ctx := context.Background()
	return []admissionPath{
		{floorPath, func() (func() bool, error) {
			w := new(padded)
			return func() bool {
				now := uint64(time.Since(base))
				old := w.v.Load()
				w.v.CompareAndSwap(old, max(old, now)+1) // one goroutine: never fails
				return true
			}, nil
		}},
		{"Bucket.TryAcquire (one tier, no stream counters)", func() (func() bool, error) {
			b, err := tokenbucket.NewBucket(1e15, 1e15)
			if err != nil {
				return nil, err
			}
			return func() bool { return b.TryAcquire(1) }, nil
		}},
		{"unlimited (cost 0)", func() (func() bool, error) {
			s, err := stream(1)
			if err != nil {
				return nil, err
			}
			return func() bool { return s.TryAcquire(0) }, nil
		}},
		{"limited Stream.TryAcquire", func() (func() bool, error) {
			s, err := stream(1)
			if err != nil {
				return nil, err
			}
			return func() bool { return s.TryAcquire(1) }, nil
		}},
		{"limited Stream.Wait", func() (func() bool, error) {
			s, err := stream(1)
			if err != nil {
				return nil, err
			}
			return func() bool { return s.Wait(ctx, 1) == nil }, nil
		}},
		{"limited Stream.TryAcquire, 1 ns refill period (no lease pays)", func() (func() bool, error) {
			s, err := streamOf(1, time.Nanosecond)
			if err != nil {
				return nil, err
			}
			return func() bool { return s.TryAcquire(1) }, nil
		}},
		{"limited TryAcquire, two tiers (share 0.5)", func() (func() bool, error) {
			s, err := stream(0.5)
			if err != nil {
				return nil, err
			}
			return func() bool { return s.TryAcquire(1) }, nil
		}},
	}
}

// admissionRow is one path's figures: ns per call and the ratio to the
// floor, one of each per round, and their medians and ranges.
type admissionRow struct {
	Name    string    `json:"name"`
	NsRound []float64 `json:"ns_per_round"`
	XFloor  []float64 `json:"x_floor_per_round"`
	Ns      spread    `json:"ns"`
	X       spread    `json:"x_floor"`
	Refused int       `json:"refused,omitempty"`
}

// measureAdmission runs rounds rounds of calls calls per path.
func measureAdmission(rounds, calls int) ([]admissionRow, error) {
	paths := admissionPaths()
	rows := make([]admissionRow, len(paths))
	for r := 0; r < rounds; r++ {
		ops := make([]func() bool, len(paths))
		for i, p := range paths {
			op, err := p.setup()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.name, err)
			}
			ops[i] = op
		}
		blocks := max(calls/admissionBlock, 1)
		per := make([][]float64, len(paths)) // ns per call, one per block
		for b := 0; b < blocks; b++ {
			for k := range ops {
				i := (k + b + r) % len(ops) // rotate which path goes first
				op := ops[i]
				t0 := time.Now()
				for range admissionBlock {
					if !op() {
						rows[i].Refused++
					}
				}
				per[i] = append(per[i], float64(time.Since(t0))/admissionBlock)
			}
		}
		// The median block: a block the scheduler or a neighbour
		// interrupted is an outlier on a shared machine, not the path's cost.
		floor := spreadOf(per[0]).Median
		for i := range rows {
			m := spreadOf(per[i]).Median
			rows[i].NsRound = append(rows[i].NsRound, m)
			rows[i].XFloor = append(rows[i].XFloor, m/floor)
		}
	}
	for i := range rows {
		rows[i].Name = paths[i].name
		rows[i].Ns, rows[i].X = spreadOf(rows[i].NsRound), spreadOf(rows[i].XFloor)
	}
	return rows, nil
}

func writeAdmission(w io.Writer, rows []admissionRow, calls int, md bool) {
	sep, start, end := "  ", "", ""
	if md {
		sep, start, end = " | ", "| ", " |"
	}
	line := func(cols ...string) { fmt.Fprintln(w, start+strings.Join(cols, sep)+end) }
	fmt.Fprintf(w, "\nLaunch admission, 1 goroutine, %d calls per path and round timed in blocks of %d, paths alternating block by block, a round's figure the median block (issue 19's goal: limited at most 1.3x the floor)\n\n", calls, admissionBlock)
	line("path", "ns per call", "x floor (median [min-max])", "x floor per round")
	if md {
		line("---", "---:", "---:", "---")
	}
	for _, r := range rows {
		per := ""
		for i, x := range r.XFloor {
			if i > 0 {
				per += " "
			}
			per += fmt.Sprintf("%.2f", x)
		}
		line(r.Name, r.Ns.String(), fmt.Sprintf("%.2f [%.2f-%.2f]", r.X.Median, r.X.Min, r.X.Max), per)
	}
	for _, r := range rows {
		if r.Refused > 0 {
			fmt.Fprintf(w, "- %s: **%d refusals**, though the rate was set never to refuse\n", r.Name, r.Refused)
		}
	}
}
