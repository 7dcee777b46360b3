package fcsp

// Bandwidth visibility. A partition's kernels share the device's memory
// bandwidth with every other partition's, so a tenant may run slower than
// its SMs promise. Two figures show it, both from the GPU time a metered
// tenant measures anyway (internal/admission):
//
//   - achieved bandwidth, for kernels whose bytes per launch are declared
//     (Function.SetBytesMoved): declared bytes / measured GPU time;
//   - slowdown, with no declaration: per kernel shape, the running estimate
//     of its duration over the lowest that estimate has been, averaged over
//     the tenant's recent launches weighted by their GPU time.

// BandwidthStats is a tenant's memory-bandwidth figures (Stats.Bandwidth).
// The recent figures cover the tenant's last ~100 ms of GPU time on each
// stream, and only launches whose events have completed; they are 0 for a
// tenant that is not metered (WithGPUMetering, WithGPUShare,
// WithPriority(LatencyCritical) or WithBandwidthFloor meter it) or has no
// such launch yet.
type BandwidthStats struct {
	Priority Priority // WithPriority
	Floor    float64  // WithBandwidthFloor; 0: none
	// FlooredLaunches counts launches admitted at the floor (while a
	// LatencyCritical tenant of the pool had work in flight).
	FlooredLaunches uint64

	// BytesMoved is the declared bytes (Function.SetBytesMoved) of the
	// tenant's completed launches.
	BytesMoved uint64
	// BytesPerSecond is the achieved bandwidth of the tenant's recent
	// launches with declared bytes: their bytes over their GPU time. 0:
	// none declared.
	BytesPerSecond float64
	// Slowdown is how much slower the tenant's kernels ran recently than
	// they ever have: for each launch, its kernel shape's running estimate
	// over the lowest that estimate has been, weighted by the launch's GPU
	// time. 1 means as fast as ever seen, 1.5 half as fast again. It is
	// relative to the best this process has seen, not to the kernel
	// alone on the device: a tenant that has only ever run beside a busy
	// neighbour reads about 1. 0: nothing measured.
	Slowdown float64
}

// SetBytesMoved declares how many bytes of device memory one launch of f
// reads and writes (for a = b + s*c over n floats, 12n), so that a metered
// tenant reports its achieved bandwidth (Stats.Bandwidth.BytesPerSecond).
// It applies to launches made after the call, whatever their shape; 0
// stops the declaration.
func (f *Function) SetBytesMoved(n uint64) { f.k.Bytes.Store(n) }

// BytesMoved is what SetBytesMoved declared.
func (f *Function) BytesMoved() uint64 { return f.k.Bytes.Load() }
