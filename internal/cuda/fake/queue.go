package fake

import "github.com/fcsp-go/fcsp-go/internal/cuda"

// Streams run their work outside the driver's lock, in order, as a GPU's
// queues do: one tenant's long kernel holds its own stream and no other
// call (issue 58: a kernel run under Driver.mu held every tenant's calls,
// which a GPU's other partitions never see).
//
// Each stream keeps a queue of the work issued on it (kernels, graphs,
// memsets, frees, holds and waits on events). Work issued on an idle
// stream runs on the caller's goroutine before the call returns, so a
// test that launches and then reads the result without a synchronisation
// sees it, as before (the fake stays deterministic). Work issued behind
// queued work joins the queue and the call returns at once, as on a GPU;
// a goroutine of the stream's (drain) runs the queue, one item at a time.
// An item starts once the holds it carries are released (HoldStream,
// HoldKernel, spin(kernels.SpinForever)) and the event mark it waits for
// (StreamWaitEvent) is reached.
//
// Completion is counted per stream: issued and done number its items, an
// event recorded on it is complete once done reaches the count issued
// when it was recorded, and every wait (cuStreamSynchronize,
// cuEventSynchronize, cuCtxSynchronize) waits on Driver.cond for its mark.

// work is one item of a stream's queue.
type work struct {
	seq uint64
	// run is what runs outside Driver.mu, on the device memory (a kernel,
	// a graph's work, a memset); nil: nothing.
	run func(*Memory) error
	// locked runs under Driver.mu when the item's turn comes (a free's
	// bookkeeping); nil: nothing.
	locked func()
	// fault runs under Driver.mu when run failed (a kernel's illegal
	// address poisons the device); nil: nothing.
	fault func()
	holds []*hold // it starts once every one is released
	wait  *mark   // it starts once this mark is reached
}

// mark is a point in a stream's queue: reached once seq of its items are
// done (or the stream died in a reset).
type mark struct {
	st  *streamInfo
	seq uint64
}

func (m mark) reached() bool { return m.st == nil || m.st.dead || m.st.done >= m.seq }

// hold keeps the work that carries it from starting until released.
type hold struct{ released bool }

// markOf is the end of what has been issued on st so far.
func markOf(st *streamInfo) mark { return mark{st: st, seq: st.issued} }

// ready says w may start. The caller holds d.mu.
func (w *work) ready() bool {
	for _, h := range w.holds {
		if !h.released {
			return false
		}
	}
	return w.wait == nil || w.wait.reached()
}

// submit issues w on st: it runs it here when st is idle and w ready,
// returning its error once it ran; otherwise it queues it for st's drain
// and returns nil at once. The caller holds d.mu; submit releases it.
func (d *Driver) submit(st *streamInfo, w *work) error {
	if len(st.queue) > 0 || st.running || !w.ready() {
		st.issued++
		w.seq = st.issued
		st.queue = append(st.queue, w)
		d.startDrain(st)
		d.mu.Unlock()
		return nil
	}
	seq := d.begin(st)
	err := d.execute(w)
	d.end(st, seq)
	d.mu.Unlock()
	return err
}

// execute runs w: its locked part under d.mu, its run outside it, its
// fault where the run failed. The caller holds d.mu, held again when
// execute returns.
func (d *Driver) execute(w *work) error {
	if w.locked != nil {
		w.locked()
	}
	var err error
	if w.run != nil {
		d.mu.Unlock()
		err = w.run(&d.mem)
		d.mu.Lock()
	}
	if err != nil && w.fault != nil {
		w.fault()
	}
	return err
}

// runsNow says work issued on st now would run at once, on the caller's
// goroutine: nothing is queued or running there. The caller holds d.mu.
func runsNow(st *streamInfo) bool { return len(st.queue) == 0 && !st.running }

// begin issues an item on st that runs at once, on the caller's goroutine
// (runsNow), and returns its number; end retires it. The caller holds d.mu
// for both, and may let it go between them. (LaunchKernel and GraphLaunch
// call them directly: a launch allocates nothing.)
func (d *Driver) begin(st *streamInfo) uint64 {
	st.issued++
	st.running = true
	return st.issued
}

func (d *Driver) end(st *streamInfo, seq uint64) {
	st.running = false
	st.done = max(st.done, seq) // a reset meanwhile set it past seq
	if len(st.queue) > 0 {
		d.startDrain(st) // queued behind it meanwhile
	}
	d.cond.Broadcast()
}

// runHead runs w, the head of st's queue, outside d.mu, and retires it.
// The caller (drain) holds d.mu, which it holds again when runHead returns.
func (d *Driver) runHead(st *streamInfo, w *work) {
	st.running = true
	_ = d.execute(w) // a failure is w's fault's to report
	st.running = false
	if len(st.queue) > 0 && st.queue[0] == w { // else a reset dropped the queue
		st.queue[0] = nil
		st.queue = st.queue[1:]
		st.done = w.seq
	}
	d.cond.Broadcast()
}

// startDrain starts st's drain unless it runs, or its head runs on a
// caller's goroutine (which starts it when done). The caller holds d.mu.
func (d *Driver) startDrain(st *streamInfo) {
	if !st.draining && !st.running {
		st.draining = true
		go d.drain(st)
	}
}

// drain runs st's queue in order until it is empty, waiting for each
// item's holds and mark.
func (d *Driver) drain(st *streamInfo) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(st.queue) > 0 {
		w := st.queue[0]
		if !w.ready() {
			d.cond.Wait()
			continue
		}
		d.runHead(st, w) // a failure is the item's fault's to report
	}
	st.draining = false
}

// waitFor waits until every mark is reached. The caller holds d.mu.
func (d *Driver) waitFor(marks ...mark) {
	for _, m := range marks {
		for !m.reached() {
			d.cond.Wait()
		}
	}
}

// idle says everything issued on st is done. The caller holds d.mu.
func idle(st *streamInfo) bool { return markOf(st).reached() }

// release releases h and wakes whatever waits behind it.
func (d *Driver) release(h *hold) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h.released = true
	d.cond.Broadcast()
}

// HoldStream queues on s a stand-in for a kernel that never ends, until
// release is called: a stalled tenant's stream on a GPU (a spin on a flag
// nobody sets, a collective whose peer died). Meanwhile the stream's work
// never completes: cuStreamQuery answers CUDA_ERROR_NOT_READY,
// cuStreamSynchronize and cuCtxSynchronize of its context wait, events
// recorded on it after the hold never complete (cuEventQuery answers not
// ready, cuEventSynchronize waits) and neither does a stream that waits on
// one of them (cuStreamWaitEvent); launches, memsets and frees queued on
// it return at once and run, in order, after the release. Every other
// stream, and every other call, keeps working. release may be called more
// than once; a reset of the device (cuDevicePrimaryCtxReset) ends the hold
// with the stream. s must be a live stream (not the NULL stream).
func (d *Driver) HoldStream(s cuda.Stream) (release func(), err error) {
	d.mu.Lock()
	st := d.streams[s]
	if s == 0 || st == nil {
		d.mu.Unlock()
		return nil, cuda.Check("HoldStream", cuda.ErrorInvalidHandle)
	}
	h := &hold{}
	_ = d.submit(st, &work{holds: []*hold{h}}) // unlocks
	return func() { d.release(h) }, nil
}

// HoldKernel makes every launch of the kernel called name, from now until
// release, a kernel that does not end until release: the launch returns,
// and its stream stalls behind it as HoldStream's does. At the release the
// held launches run (their Go bodies, if any) and the kernel's later
// launches run as usual. Launches already queued are not held; a graph
// that replays the kernel is held as its launch would be.
func (d *Driver) HoldKernel(name string) (release func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := &hold{}
	if d.kernelHolds == nil {
		d.kernelHolds = map[string][]*hold{}
	}
	d.kernelHolds[name] = append(d.kernelHolds[name], h)
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		l := d.kernelHolds[name]
		for i, x := range l {
			if x == h {
				d.kernelHolds[name] = append(l[:i:i], l[i+1:]...)
				break
			}
		}
		if len(d.kernelHolds[name]) == 0 {
			delete(d.kernelHolds, name)
		}
		h.released = true
		d.cond.Broadcast()
	}
}

// holdsFor is the holds a launch of the kernel name with these arguments
// carries: HoldKernel's, and the spin hold for a spin that never ends.
// The caller holds d.mu.
func (d *Driver) holdsFor(name string, args []byte, offs []uint32) []*hold {
	hs := d.kernelHolds[name]
	if f := d.forever[name]; f != nil && f(args, offs) {
		if d.spins == nil {
			d.spins = &hold{}
		}
		hs = append(hs[:len(hs):len(hs)], d.spins)
	}
	return hs
}

// ReleaseSpins ends every launch so far of a kernel that never ends
// (spin(kernels.SpinForever), RegisterKernels): on a GPU only the end of
// the process or a reset ends one; on the fake, this does too. Spins
// launched after it never end either, until the next ReleaseSpins.
func (d *Driver) ReleaseSpins() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.spins != nil {
		d.spins.released = true
		d.spins = nil
		d.cond.Broadcast()
	}
}

// neverEnds says that a launch of the kernel name whose arguments satisfy
// f never ends until ReleaseSpins.
func (d *Driver) neverEnds(name string, f func(args []byte, offs []uint32) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.forever == nil {
		d.forever = map[string]func([]byte, []uint32) bool{}
	}
	d.forever[name] = f
}

// dropQueue ends st with a reset: its queued work is dropped and every
// wait on it returns. A kernel running on it finishes on its own. The
// caller holds d.mu.
func (d *Driver) dropQueue(st *streamInfo) {
	st.dead = true
	for i := range st.queue {
		st.queue[i] = nil
	}
	st.queue = nil
	st.done = st.issued
	d.cond.Broadcast()
}
