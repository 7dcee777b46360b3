package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// The three ways the server can share the GPU between its request classes.
const (
	modeShared      = "shared"      // both tenants on every SM, no rate limit
	modeRateLimit   = "ratelimit"   // both on every SM, batch launch rate limited
	modePartitioned = "partitioned" // interactive SMs of its own, batch the rest (and limited)
)

var modes = []string{modeShared, modeRateLimit, modePartitioned}

// Kernel sizes when the size flags are left at 0: the day-94 shapes on a GPU,
// and shapes small enough for the fake driver, which runs every FMA in Go.
var (
	gpuSizes = map[string][2]int{"interactive": {64 << 10, 1024}, "batch": {4 << 20, 8192}}
	simSizes = map[string][2]int{"interactive": {4096, 16}, "batch": {65536, 16}}
)

// maxNFactor is the default cap on a request's n: this many times the
// class's n (-<class>-max-n 0).
const maxNFactor = 16

// classConfig is one request class: its kernel and its tenant's limits.
type classConfig struct {
	N       int      `json:"n"`        // elements per request; 0: device default
	Steps   int      `json:"steps"`    // FMA steps per element; 0: device default
	SMs     int      `json:"sms"`      // partition size (interactive, partitioned mode)
	SMLimit float64  `json:"sm_limit"` // launch-rate fraction (batch; ratelimit and partitioned modes)
	Quota   uint64   `json:"quota"`    // memory quota in bytes; 0: the device
	Streams int      `json:"streams"`  // requests on the GPU at once (one stream each)
	Timeout Duration `json:"timeout"`  // per-request deadline
	MaxN    int      `json:"max_n"`    // largest n a request body may ask for; 0: maxNFactor x N

	GPUShare float64 `json:"gpu_share"` // share of the GPU's time (WithGPUShare); replaces SMLimit when set

	// LatencyCritical holds floored classes down while this class has
	// work in flight (WithPriority(LatencyCritical)); BandwidthFloor is
	// the fraction of its GPU share a class keeps meanwhile
	// (WithBandwidthFloor; 0: it does not yield).
	LatencyCritical bool    `json:"latency_critical"`
	BandwidthFloor  float64 `json:"bandwidth_floor"`
}

// config is everything the server reads from flags and the -config file.
type config struct {
	Addr            string      `json:"addr"`
	Mode            string      `json:"mode"`
	Device          int         `json:"device"`
	Simulate        bool        `json:"simulate"`
	PartitionUnit   int         `json:"partition_unit"` // 0: the device's granularity
	Verify          int         `json:"verify"`         // elements checked per request; 0: none
	ShutdownTimeout Duration    `json:"shutdown_timeout"`
	LogLevel        string      `json:"log_level"`
	LogFormat       string      `json:"log_format"`
	Interactive     classConfig `json:"interactive"`
	Batch           classConfig `json:"batch"`
	// Objectives maps the objective an inference gateway names in a
	// request's header (an InferenceObjective's name) to the class that
	// serves it; a request without one, or with another, is its route's.
	Objectives map[string]string `json:"objectives,omitempty"`

	// Set by tests: called with the pool once the server is ready to serve.
	onReady func(*fcsp.Pool) `json:"-"`
	// logOut is where logs go (stderr when nil).
	logOut io.Writer `json:"-"`
	// gate, set by tests: a request that holds a stream, its memory
	// allocated, waits until gate is closed.
	gate <-chan struct{} `json:"-"`
}

func defaultConfig() config {
	return config{
		Addr:            "127.0.0.1:8080",
		Mode:            modePartitioned,
		Verify:          16,
		ShutdownTimeout: Duration(10 * time.Second),
		LogLevel:        "info",
		LogFormat:       "text",
		Interactive:     classConfig{SMs: 16, Quota: 1 << 30, Streams: 4, Timeout: Duration(2 * time.Second)},
		Batch:           classConfig{SMLimit: 0.5, Quota: 8 << 30, Streams: 4, Timeout: Duration(60 * time.Second)},
	}
}

// parseConfig reads flags (args without the program name). Flags given on
// the command line win over the -config file, which wins over defaults: the
// flags are parsed twice, once to find the file and once more after it.
func parseConfig(args []string, stderr io.Writer) (config, error) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var file string
	fs.StringVar(&file, "config", "", "JSON config file (flags given on the command line override it)")
	bindFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if file != "" {
		if err := loadFile(file, &cfg); err != nil {
			return cfg, err
		}
		if err := fs.Parse(args); err != nil {
			return cfg, err
		}
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return cfg, cfg.validate()
}

func bindFlags(fs *flag.FlagSet, c *config) {
	fs.StringVar(&c.Addr, "addr", c.Addr, "listen address")
	fs.StringVar(&c.Mode, "mode", c.Mode, "GPU sharing: "+strings.Join(modes, ", "))
	fs.IntVar(&c.Device, "device", c.Device, "GPU index")
	fs.BoolVar(&c.Simulate, "simulate", c.Simulate, "use the simulated H200 even if a GPU is present")
	fs.IntVar(&c.PartitionUnit, "partition-unit", c.PartitionUnit, "SMs per partition group (0: the device's granularity)")
	fs.IntVar(&c.Verify, "verify", c.Verify, "elements of each result copied back and checked (0: none)")
	fs.Var(&c.ShutdownTimeout, "shutdown-timeout", "how long shutdown waits for requests in flight")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "text or json")
	fs.Var(objectiveFlag{&c.Objectives}, "objective", "objective=class: serve requests whose "+objectiveHeader+" (or "+oldObjectiveHeader+") header names the objective in the class's tenant (repeat, or separate with commas)")
	bindClass(fs, "interactive", &c.Interactive)
	bindClass(fs, "batch", &c.Batch)
}

// objectiveFlag is -objective: objective=class pairs into the map.
type objectiveFlag struct{ m *map[string]string }

func (f objectiveFlag) String() string {
	if f.m == nil {
		return ""
	}
	var kv []string
	for k, v := range *f.m {
		kv = append(kv, k+"="+v)
	}
	slices.Sort(kv)
	return strings.Join(kv, ",")
}

func (f objectiveFlag) Set(s string) error {
	for _, pair := range strings.Split(s, ",") {
		obj, class, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || obj == "" || class == "" {
			return fmt.Errorf("%q: want objective=class, e.g. premium=interactive", pair)
		}
		if *f.m == nil {
			*f.m = map[string]string{}
		}
		(*f.m)[obj] = class
	}
	return nil
}

func bindClass(fs *flag.FlagSet, name string, c *classConfig) {
	fs.IntVar(&c.N, name+"-n", c.N, name+" kernel elements (0: "+sizeHelp(name, 0)+")")
	fs.IntVar(&c.Steps, name+"-steps", c.Steps, name+" kernel FMA steps per element (0: "+sizeHelp(name, 1)+")")
	fs.IntVar(&c.SMs, name+"-sms", c.SMs, name+" partition SMs in partitioned mode (a multiple of the partition unit)")
	fs.Float64Var(&c.SMLimit, name+"-sm-limit", c.SMLimit, name+" launch-rate limit in (0, 1]; 0: none")
	fs.Float64Var(&c.GPUShare, name+"-gpu-share", c.GPUShare, name+" share of the GPU's time in (0, 1] (WithGPUShare; replaces -"+name+"-sm-limit); 0: none")
	fs.BoolVar(&c.LatencyCritical, name+"-latency-critical", c.LatencyCritical, name+" holds floored classes down while it has work in flight (WithPriority(LatencyCritical))")
	fs.Float64Var(&c.BandwidthFloor, name+"-bandwidth-floor", c.BandwidthFloor, name+" keeps this fraction in (0, 1] of its GPU share while a latency-critical class has work in flight (WithBandwidthFloor); 0: none")
	fs.Uint64Var(&c.Quota, name+"-quota", c.Quota, name+" memory quota in bytes (0: the device)")
	fs.IntVar(&c.Streams, name+"-streams", c.Streams, name+" requests on the GPU at once (one stream each)")
	fs.Var(&c.Timeout, name+"-timeout", name+" request deadline, over the whole request (waiting, launch, kernel): past it 503")
	fs.IntVar(&c.MaxN, name+"-max-n", c.MaxN, fmt.Sprintf("%s largest n a request may ask for (0: %d x the class's n; up to %d)", name, maxNFactor, 1<<31-1))
}

func sizeHelp(class string, i int) string {
	return fmt.Sprintf("%d on a GPU, %d simulated", gpuSizes[class][i], simSizes[class][i])
}

func loadFile(path string, c *config) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields() // a misspelt key should not be silently ignored
	if err := dec.Decode(c); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// validate checks what can be checked before the device is open; partition
// sizes are checked against the device's unit once it is.
func (c *config) validate() error {
	var errs []error
	switch c.Mode {
	case modeShared, modeRateLimit, modePartitioned:
	default:
		errs = append(errs, fmt.Errorf("-mode %q: want one of %s", c.Mode, strings.Join(modes, ", ")))
	}
	for _, cl := range []struct {
		name string
		c    *classConfig
	}{{"interactive", &c.Interactive}, {"batch", &c.Batch}} {
		errs = append(errs, cl.c.validate(cl.name))
	}
	if c.Mode == modePartitioned && c.Interactive.SMs <= 0 {
		errs = append(errs, fmt.Errorf("-interactive-sms %d: partitioned mode needs a positive SM count", c.Interactive.SMs))
	}
	if c.Mode != modeShared && c.Batch.SMLimit <= 0 && c.Batch.GPUShare <= 0 {
		errs = append(errs, fmt.Errorf("-batch-sm-limit %v: %s mode needs a limit in (0, 1]", c.Batch.SMLimit, c.Mode))
	}
	if c.Verify < 0 {
		errs = append(errs, fmt.Errorf("-verify %d: want 0 or more", c.Verify))
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("-log-format %q: want text or json", c.LogFormat))
	}
	for obj, class := range c.Objectives {
		if obj == "" || (class != "interactive" && class != "batch") {
			errs = append(errs, fmt.Errorf("-objective %s=%s: want a named objective and a class, interactive or batch", obj, class))
		}
	}
	return errors.Join(errs...)
}

func (c *classConfig) validate(name string) error {
	var errs []error
	// The kernel takes n and steps as int32.
	const maxInt32 = 1<<31 - 1
	if c.N < 0 || c.N > maxInt32 || c.Steps < 0 || c.Steps > maxInt32 {
		errs = append(errs, fmt.Errorf("-%s-n %d / -%s-steps %d: want 0 (device default) up to %d", name, c.N, name, c.Steps, maxInt32))
	}
	if c.SMLimit < 0 || c.SMLimit > 1 {
		errs = append(errs, fmt.Errorf("-%s-sm-limit %v: want 0 (none) or a fraction in (0, 1]", name, c.SMLimit))
	}
	if c.GPUShare < 0 || c.GPUShare > 1 {
		errs = append(errs, fmt.Errorf("-%s-gpu-share %v: want 0 (none) or a fraction in (0, 1]", name, c.GPUShare))
	}
	if c.BandwidthFloor < 0 || c.BandwidthFloor > 1 {
		errs = append(errs, fmt.Errorf("-%s-bandwidth-floor %v: want 0 (none) or a fraction in (0, 1]", name, c.BandwidthFloor))
	}
	if c.BandwidthFloor > 0 && c.SMLimit > 0 && c.GPUShare <= 0 {
		errs = append(errs, fmt.Errorf("-%s-bandwidth-floor with -%s-sm-limit: the launch-rate model cannot be floored; give -%s-gpu-share instead", name, name, name))
	}
	if c.Streams <= 0 {
		errs = append(errs, fmt.Errorf("-%s-streams %d: want at least 1", name, c.Streams))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("-%s-timeout %v: want a positive duration", name, c.Timeout))
	}
	if c.MaxN < 0 || c.MaxN > maxInt32 {
		errs = append(errs, fmt.Errorf("-%s-max-n %d: want 0 up to %d", name, c.MaxN, maxInt32))
	}
	return errors.Join(errs...)
}

// withSizes fills sizes left at 0 with the defaults for the device kind,
// and the cap on a request's n with maxNFactor times the class's n.
func (c classConfig) withSizes(class string, simulated bool) classConfig {
	def := gpuSizes[class]
	if simulated {
		def = simSizes[class]
	}
	if c.N == 0 {
		c.N = def[0]
	}
	if c.Steps == 0 {
		c.Steps = def[1]
	}
	if c.MaxN == 0 {
		c.MaxN = min(maxNFactor*c.N, 1<<31-1)
	}
	return c
}

func (c *config) logger() *slog.Logger {
	out := c.logOut
	if out == nil {
		out = os.Stderr
	}
	lvl, _ := parseLevel(c.LogLevel)
	opts := &slog.HandlerOptions{Level: lvl}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(out, opts))
	}
	return slog.New(slog.NewTextHandler(out, opts))
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("-log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// Duration is a time.Duration that reads "250ms" from flags and JSON.
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

// Set implements flag.Value.
func (d *Duration) Set(s string) error {
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// UnmarshalJSON takes a string ("2s") or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		return d.Set(s)
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("duration %s: want a string like \"2s\" or nanoseconds", b)
	}
	*d = Duration(n)
	return nil
}

// MarshalJSON writes the string form, so configs round-trip.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }
