package config

import (
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/dra"
	"github.com/fcsp-go/fcsp-go/internal/shm"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// SpinInDriver is fcsp.SpinInDriver's value: WithHostWait's spin that
// waits in the driver.
const SpinInDriver time.Duration = -1

// DefaultDampening is the fraction of a kernel's computed cost charged
// when LimiterTuning.Dampening is not given.
const DefaultDampening = 0.9

// Pool is what Open's options chose. The zero value is no option given;
// NewPool sets the defaults that are not zero.
type Pool struct {
	NewDriver   func() cuda.Driver // nil: load libcuda (withDriver sets it)
	Simulated   bool
	Unit        int      // partition group size; 0: the device's granularity
	Prewarm     []int    // partitions provisioned at Open
	MemLimit    uint64   // 0: the device's memory
	Environ     []string // WithEnviron's list, laid over the process's environment (internal/environ); nil: HAMi-core's variables not read
	Logger      *slog.Logger
	Dampening   float64
	Penalty     float64       // tokenbucket's: 0 default, NoPenalty none
	Refill      time.Duration // 0: tokenbucket's default
	Region      string        // shared region path, "": none
	Foreign     bool          // accept a region file of another user (WithForeignSharedRegion)
	Beat        time.Duration
	ReapAfter   time.Duration
	SplitFlag   uint32        // cuDevSmResourceSplitByCount flags (WithoutCoscheduling)
	HostWait    time.Duration // how long Synchronize spins (WithHostWait)
	HostWaitSet bool
	DRAFile     string        // a DRA claim's device metadata file (WithDRAMetadata); "": dra.Env in Environ, if set
	Stall       time.Duration // WithStallTimeout: every tenant's bound; 0: none watched
	OnStall     any           // WithStallHandler's func(fcsp.StallReport), kept as any (this package does not know the face's types)
	Greens      int           // WithGreenContextLimit; 0: none
	Sample      time.Duration // WithMemorySampling; 0: off
	SampleSet   bool
	Unaccounted uint64 // WithUnaccountedMemoryBound; 0: no warning
	Headroom    bool   // WithUnaccountedHeadroom
}

// SetStall is WithStallTimeout.
func (c *Pool) SetStall(d time.Duration) error {
	if d < time.Millisecond {
		return invalid("stall timeout %v; want 1ms or more (longer than the longest kernel a class runs, and the queue it keeps before it)", d)
	}
	c.Stall = d
	return nil
}

// DefaultSample is how often a pool samples NVML's figure for the process
// where WithMemorySampling does not say: a GPU's pool samples, the
// simulator's (which has no NVML) does not.
const DefaultSample = time.Second

// SamplePeriod is how often the pool samples the device's view of its
// memory (0: never).
func (c *Pool) SamplePeriod() time.Duration {
	switch {
	case c.SampleSet:
		return c.Sample
	case c.Simulated:
		return 0
	}
	return DefaultSample
}

// Driver is the driver the options chose: a test's (fcsptest's, through
// withDriver), else libcuda, loaded (cuda.ErrNoDriver where there is none).
func (c *Pool) Driver() (cuda.Driver, error) {
	if c.NewDriver != nil {
		return c.NewDriver(), nil
	}
	lib, err := cuda.Load()
	if err != nil {
		return nil, err
	}
	return lib, nil
}

// SetGreenLimit is WithGreenContextLimit.
func (c *Pool) SetGreenLimit(n int) error {
	if n < 1 {
		return invalid("WithGreenContextLimit(%d); want at least 1 (a partition's layout has a context of its own)", n)
	}
	c.Greens = n
	return nil
}

// SetSample is WithMemorySampling.
func (c *Pool) SetSample(every time.Duration) error {
	if every < 0 || every > 0 && every < time.Millisecond {
		return invalid("WithMemorySampling(%v); want 0 (off) or 1ms or more (NVML's process list costs a call into the kernel driver)", every)
	}
	c.Sample, c.SampleSet = every, true
	return nil
}

// SetUnaccounted is WithUnaccountedMemoryBound.
func (c *Pool) SetUnaccounted(bytes uint64) error {
	if bytes == 0 {
		return invalid("WithUnaccountedMemoryBound(0); want a positive byte count")
	}
	c.Unaccounted = bytes
	return nil
}

// NewPool is the configuration of a pool opened without options.
func NewPool() Pool { return Pool{Dampening: DefaultDampening} }

// SetDRAFile is WithDRAMetadata.
func (c *Pool) SetDRAFile(path string) error {
	if path == "" {
		return invalid("DRA device metadata file \"\"; want the path of the file the kubelet mounts for the claim (/var/run/kubernetes.io/dra-device-attributes/...)")
	}
	c.DRAFile = path
	return nil
}

// DRAMetadata is the DRA device metadata file Open finds its device by:
// WithDRAMetadata's, else the environment's dra.Env (WithEnviron), else
// none ("").
func (c *Pool) DRAMetadata() string {
	if c.DRAFile != "" {
		return c.DRAFile
	}
	for _, kv := range c.Environ {
		if v, ok := strings.CutPrefix(kv, dra.Env+"="); ok {
			return v
		}
	}
	return ""
}

// SetPartitionUnit is WithPartitionUnit.
func (c *Pool) SetPartitionUnit(sms int) error {
	if sms <= 0 {
		return invalid("partition unit %d SMs; want a positive SM count", sms)
	}
	c.Unit = sms
	return nil
}

// AddPrewarm is WithPrewarm: the sizes add to those of earlier calls.
func (c *Pool) AddPrewarm(sizes []int) error {
	if err := positive("prewarm size", sizes); err != nil {
		return err
	}
	c.Prewarm = append(c.Prewarm, sizes...)
	return nil
}

// SetMemLimit is WithDeviceMemoryLimit.
func (c *Pool) SetMemLimit(bytes uint64) error {
	if bytes == 0 {
		return invalid("device memory limit 0; want a positive byte count")
	}
	c.MemLimit = bytes
	return nil
}

// SetTuning is WithLimiterTuning: a zero field keeps its default, and a
// penalty of tokenbucket.NoPenalty turns the penalty off.
func (c *Pool) SetTuning(refill time.Duration, dampening, penalty float64) error {
	if refill != 0 {
		if err := c.SetRefill(refill); err != nil {
			return err
		}
	}
	if dampening != 0 {
		if err := c.SetDampening(dampening); err != nil {
			return err
		}
	}
	if penalty != 0 {
		return c.SetPenalty(penalty)
	}
	return nil
}

// SetDampening is LimiterTuning.Dampening.
func (c *Pool) SetDampening(f float64) error {
	if math.IsNaN(f) || f <= 0 || f > 1 {
		return invalid("dampening %v; want a number in (0, 1]", f)
	}
	c.Dampening = f
	return nil
}

// SetPenalty is LimiterTuning.ThrottlePenalty: a weight >= 0 (0 is
// tokenbucket's default, 1), or tokenbucket.NoPenalty (fcsp's
// NoThrottlePenalty), which turns the penalty off.
func (c *Pool) SetPenalty(w float64) error {
	if w != tokenbucket.NoPenalty && (math.IsNaN(w) || math.IsInf(w, 0) || w < 0) {
		return invalid("throttle penalty %v; want a finite number >= 0, or NoThrottlePenalty", w)
	}
	c.Penalty = w
	return nil
}

// SetRefill is LimiterTuning.RefillPeriod.
func (c *Pool) SetRefill(d time.Duration) error {
	if d <= 0 {
		return invalid("refill period %v; want a positive duration", d)
	}
	c.Refill = d
	return nil
}

// SetHostWait is WithHostWait.
func (c *Pool) SetHostWait(spin time.Duration) error {
	if spin < 0 && spin != SpinInDriver {
		return invalid("WithHostWait(%v); want a spin of 0 or more, or SpinInDriver", spin)
	}
	c.HostWait, c.HostWaitSet = spin, true
	return nil
}

// The OS's limits on a path (Linux's PATH_MAX, counting the NUL that ends
// it, and NAME_MAX): a longer one fails in open(2), after Open has begun.
const (
	pathMax = 4096
	nameMax = 255
)

// SetRegion is WithSharedRegion: the path must be absolute (a relative one
// would name a file in whatever folder the process runs in), hold no NUL
// byte, keep to the OS's limits on paths and names, and name a file,
// existing or not, in a folder that exists.
func (c *Pool) SetRegion(path string) error {
	q := shortQuote(path)
	switch {
	case path == "":
		return invalid("empty shared region path (the default is %s)", shm.DefaultPath)
	case strings.IndexByte(path, 0) >= 0:
		return invalid("shared region path %s holds a NUL byte, which no file name may", q)
	case !filepath.IsAbs(path):
		return invalid("shared region path %s is not absolute; give the whole path (such as %s)", q, shm.DefaultPath)
	case len(path) >= pathMax:
		return invalid("shared region path %s: a path of %d bytes; the OS takes paths of at most %d", q, len(path), pathMax-1)
	}
	for _, name := range strings.Split(path, "/") {
		if len(name) > nameMax {
			return invalid("shared region path %s: a name of %d bytes; the OS takes names of at most %d", q, len(name), nameMax)
		}
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return invalid("shared region path %s is a directory; give a file in it (such as %s)", q, filepath.Join(path, "fcsp"))
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return invalid("shared region path %s: its folder %s does not exist", q, shortQuote(filepath.Dir(path)))
	}
	c.Region = path
	return nil
}

// shortQuote quotes s for a message, its middle cut where it is long.
func shortQuote(s string) string {
	if len(s) <= 120 {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:56]) + "..." + strconv.Quote(s[len(s)-56:])
}

// MinBeat is the shortest heartbeat: a beat (and the reaper's scan, which
// runs as often) more often than every millisecond busies a core and
// tells the other processes nothing sooner that matters.
const MinBeat = time.Millisecond

// SetHeartbeat is WithHeartbeat.
func (c *Pool) SetHeartbeat(every, timeout time.Duration) error {
	if every < MinBeat || timeout <= every {
		return invalid("heartbeat every %v, timeout %v; want %v <= every < timeout", every, timeout, MinBeat)
	}
	c.Beat, c.ReapAfter = every, timeout
	return nil
}
