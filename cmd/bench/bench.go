package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
)

// Row is one line of the headline table.
type Row struct {
	Section  string  `json:"section"`
	Metric   string  `json:"metric"`
	Ours     float64 `json:"ours"`
	Baseline float64 `json:"baseline"`
	// Ratio is Ours / Baseline.
	Ratio float64 `json:"ratio"`
	Unit  string  `json:"unit"`
	// Against names the baseline.
	Against string `json:"baseline_is"`
	Note    string `json:"note,omitempty"`
	// DriverBound rows call the driver; on the simulator they measure only
	// the SDK's own CPU overhead.
	DriverBound bool `json:"driver_bound"`
	// Published is another system's published figure, NOT measured here.
	Published string `json:"published_not_measured_here,omitempty"`
	// Skipped says why the row has no figures.
	Skipped string `json:"skipped,omitempty"`
}

// Machine is where the report was measured.
type Machine struct {
	GPU       string `json:"gpu"`
	Driver    string `json:"driver"`
	DriverAPI int    `json:"driver_api"`
	Simulated bool   `json:"simulated"`
	// SimulatedWhy is why the simulator was used: no driver, or -simulate.
	SimulatedWhy string `json:"simulated_why,omitempty"`
	CPUs         int    `json:"cpus"`
	GOMAXPROCS   int    `json:"gomaxprocs"`
	Go           string `json:"go"`
	OS           string `json:"os"`
}

// Report is everything the program prints.
type Report struct {
	Date    time.Time `json:"date"`
	Command string    `json:"command"`
	Quick   bool      `json:"quick"`
	Machine Machine   `json:"machine"`
	Rows    []Row     `json:"rows"`
	Notes   []string  `json:"notes,omitempty"`
}

// bench holds what the sections share.
type bench struct {
	ctx      context.Context
	cfg      config
	progress io.Writer
	sim      bool
	info     fcsp.DeviceInfo
	rep      *Report
}

// measure runs the selected sections and returns the report.
func measure(ctx context.Context, c config, progress io.Writer) (*Report, error) {
	b := &bench{ctx: ctx, cfg: c, progress: progress, sim: c.simulate}
	b.rep = &Report{
		Date:    time.Now().UTC(),
		Command: commandLine(c.args),
		Quick:   c.quick,
		Machine: Machine{
			CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
			Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH,
		},
	}
	// Open once to learn the device (and whether there is one).
	pool, err := b.open()
	if errors.Is(err, fcsp.ErrNoDriver) {
		b.logf("no GPU here (%v): running on a simulated H200; driver-bound rows measure only the SDK's CPU overhead", err)
		b.sim = true
		b.rep.Machine.SimulatedWhy = "no NVIDIA driver: " + err.Error()
		pool, err = b.open()
	} else if c.simulate {
		b.rep.Machine.SimulatedWhy = "-simulate"
	}
	if err != nil {
		return nil, err
	}
	b.info = pool.Device()
	if err := pool.Close(); err != nil {
		return nil, err
	}
	m := &b.rep.Machine
	m.GPU, m.Driver, m.DriverAPI, m.Simulated = b.info.String(), b.info.Driver, b.info.DriverAPI, b.info.Simulated
	b.logf("device: %s", b.info)
	if b.sim {
		b.rep.Notes = append(b.rep.Notes,
			"SIMULATED device (no GPU): rows marked [sim] call the in-process fake driver, so they measure only the SDK's own CPU overhead, not the GPU's; the isolation rows need a GPU.")
	}
	sections := []struct {
		name string
		run  func() error
	}{
		{"create", b.creation},
		{"memory", b.memory},
		{"contention", b.contention},
		{"rate", b.rateLimiter},
		{"isolation", b.isolation},
		{"launch", b.launch},
	}
	for _, s := range sections {
		if !c.sections[s.name] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		start := time.Now()
		b.logf("%s ...", s.name)
		if err := s.run(); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		b.logf("%s done in %v", s.name, time.Since(start).Round(time.Millisecond))
	}
	return b.rep, nil
}

func commandLine(args []string) string {
	return strings.Join(append([]string{filepath.Base(os.Args[0])}, args...), " ")
}

func (b *bench) logf(format string, a ...any) {
	fmt.Fprintf(b.progress, "bench: "+format+"\n", a...)
}

// n picks an iteration count: full for a normal run, quick for -quick.
func (b *bench) n(full, quick int) int {
	if b.cfg.quick {
		return quick
	}
	return full
}

// open opens the device (the simulated one once the driver proved absent).
func (b *bench) open(opts ...fcsp.Option) (*fcsp.Pool, error) {
	if b.sim {
		opts = append(opts, fcsptest.SimulatedH200())
	}
	return fcsp.Open(b.ctx, b.cfg.device, opts...)
}

// add appends a row, computing the ratio and labelling simulated
// driver-bound rows.
func (b *bench) add(r Row) {
	if r.Baseline != 0 {
		r.Ratio = r.Ours / r.Baseline
	}
	if r.DriverBound && b.sim && r.Skipped == "" {
		r.Note = joinNote("[sim] SDK CPU overhead only", r.Note)
	}
	b.rep.Rows = append(b.rep.Rows, r)
}

// addTime appends a row of two durations in nanoseconds, in the unit that
// suits the larger.
func (b *bench) addTime(r Row, oursNs, baseNs float64) {
	r.Unit, r.Ours, r.Baseline = scaleTime(oursNs, baseNs)
	b.add(r)
}

func joinNote(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// scaleTime expresses two nanosecond figures in ns, µs or ms, whichever
// keeps the larger below 10000.
func scaleTime(a, b float64) (unit string, x, y float64) {
	m := max(a, b)
	switch {
	case m >= 10e6:
		return "ms", a / 1e6, b / 1e6
	case m >= 10e3:
		return "µs", a / 1e3, b / 1e3
	}
	return "ns", a, b
}

// rawDriver is the driver without the SDK, for the baselines: the real one
// on a GPU, a fresh fake H200 on the simulator.
type rawDriver struct {
	drv     rawAPI
	dev     cuda.Device
	primary cuda.Context
}

// rawAPI is what the baselines call: the SDK's driver calls and the
// ordinary contexts only baselines make.
type rawAPI interface {
	cuda.Driver
	cuda.Baseline
}

func (b *bench) openRaw() (*rawDriver, error) {
	var drv rawAPI
	if b.sim {
		f := fake.New(fake.H200())
		fake.RegisterKernels(f)
		drv = f
	} else {
		lib, err := cuda.Load()
		if err != nil {
			return nil, err
		}
		drv = lib
	}
	dev, err := drv.DeviceGet(b.cfg.device)
	if err != nil {
		return nil, err
	}
	primary, err := drv.PrimaryCtxRetain(dev)
	if err != nil {
		return nil, err
	}
	return &rawDriver{drv: drv, dev: dev, primary: primary}, nil
}

func (r *rawDriver) close() error { return r.drv.PrimaryCtxRelease(r.dev) }
