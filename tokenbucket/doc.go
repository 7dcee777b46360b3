// Package tokenbucket rate-limits kernel launches deterministically, in two
// tiers: one bucket for the whole device and one per stream.
//
// # Why no feedback loop
//
// HAMi-core enforces an SM limit by polling NVML utilisation (every 120 ms)
// and adjusting a launch budget from what it saw. That loop is slow to react
// (a burst runs unchecked for up to a polling period), oscillates around the
// target, and charges a tenant for whatever else happened to share the GPU
// during the sample. FCSP drops the loop: every launch is charged a cost
// computed from the launch itself (grid × block threads × a dampening
// factor, plus a throttle penalty when the tenant is limited below 100%), and
// the buckets refill at a rate fixed by the configured SM limit. The same
// launches under the same limit are always admitted the same way, and a
// limit change takes effect on the next launch, not the next sample.
//
// # Sizing
//
// The device bucket holds SMs × ThreadsPerSM × TokenFactor tokens, the thread
// slots the device can keep resident at once, and refills SMLimit of that
// every RefillPeriod (1 ms by default). A stream bucket gets a share of both
// capacity and rate; a launch must fit in its stream bucket and then in the
// device bucket, so one stream cannot starve the others beyond its share and
// all streams together cannot exceed the device limit. Stream classes scale
// the charge (see stream.Class.ThrottleScale) and NCCL launches bypass the
// limiter entirely, since throttling one rank of a collective stalls them all.
//
// # Why lock-free
//
// Acquire sits on the launch path of every kernel, so Bucket keeps its whole
// state in one atomic int64: the GCRA "theoretical arrival time" (the instant
// at which the bucket would be full again). Refill is computed lazily from a
// monotonic clock on each acquire; there is no ticking goroutine, no mutex
// and no allocation. Waiters spin briefly with a CPU pause hint and park on a
// timer only for waits long enough that the scheduler's latency does not
// matter.
//
// # One CAS per launch
//
// A stream of share 1 (every stream fcsp makes) is charged on the device
// bucket alone: its own bucket could not refuse what the device bucket
// admits. The only stream of a Limiter goes further and takes a lease: a
// slice of the device bucket's timeline charged in one go (an eighth of the
// burst at most), spent launch by launch with one CAS on a word of the
// stream's own that also counts the launches. With four Ps or more the
// slice is cut into parts (one per two Ps), a word and cache line each,
// spent earliest first, so that goroutines sharing the stream do not all
// fight over one line. The slice drains with time as
// the device's backlog does, so a lease never lets the tenant pass its rate
// or burst; it is returned before anything else touches the device bucket
// for that stream (a refund, a reservation, a wait, an adjustment), when a
// second stream opens, and when it stops paying for itself. Granting and
// returning a lease take a mutex, once per slice; a launch never waits for
// it.
package tokenbucket
