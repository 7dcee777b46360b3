package fake

import (
	"slices"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/osthread"
)

// entry points added for lib: the current context per OS thread, stream
// capture, graphs, and asynchronous memsets.

// libState is the fake's state for these entry points, kept apart from the
// rest of Driver so that it reads as one piece. Guarded by Driver.mu.
type libState struct {
	current  map[int]cuda.Context // OS thread id -> context made current by CtxSetCurrent
	overlaps int                  // calls in a green context current on another thread
	graphs   map[cuda.Graph]*graph
	execs    map[cuda.GraphExec]*graph
}

// capture is a stream being captured.
type capture struct {
	mode    int
	ops     []graphOp
	invalid cuda.Result // the first unsafe call made during the capture, or 0
}

// graphOp is one recorded kernel launch or memset.
type graphOp struct {
	name        string
	kernel      KernelFunc
	grid, block cuda.Dim3
	args        []byte
	offs        []uint32
	memset      func(*Memory) error
}

type graph struct {
	ctx cuda.Context
	ops []graphOp
}

func (d *Driver) lib() *libState {
	if d.libs.current == nil {
		d.libs.current = map[int]cuda.Context{}
		d.libs.graphs = map[cuda.Graph]*graph{}
		d.libs.execs = map[cuda.GraphExec]*graph{}
	}
	return &d.libs
}

// Overlaps counts driver calls made in a green context while another OS
// thread had it current through CtxSetCurrent: the driver's "current on one
// thread at a time" rule broken. Tests of exclusion assert it stays 0.
func (d *Driver) Overlaps() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lib().overlaps
}

// Graphs counts live graphs and instantiated graphs (leak checks).
func (d *Driver) Graphs() (graphs, execs int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.lib().graphs), len(d.lib().execs)
}

// checkOverlap records a call in context c (a green one) made on this
// thread while another thread has it current. The caller holds d.mu.
func (d *Driver) checkOverlap(c cuda.Context) {
	l := d.lib()
	if len(l.current) == 0 || c == 0 {
		return
	}
	x := d.contexts[c]
	if x == nil || x.green == nil {
		return
	}
	me := osthread.ID()
	for tid, cur := range l.current {
		if cur == c && tid != me {
			l.overlaps++
			return
		}
	}
}

// currentHere reports whether c is current on the calling thread. The
// caller holds d.mu.
func (d *Driver) currentHere(c cuda.Context) bool {
	l := d.lib()
	return len(l.current) > 0 && l.current[osthread.ID()] == c
}

func (d *Driver) CtxSetCurrent(c cuda.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.setCurrent(c, osthread.ID())
}

// setCurrent is cuCtxSetCurrent on thread me. The caller holds d.mu.
func (d *Driver) setCurrent(c cuda.Context, me int) error {
	const op = "cuCtxSetCurrent"
	l := d.lib()
	if c == 0 {
		if err := d.enter(op); err != nil {
			return err
		}
		delete(l.current, me)
		return nil
	}
	if _, err := d.ctx(op, c); err != nil {
		return err
	}
	for tid, cur := range l.current {
		if cur == c && tid != me && d.contexts[c].green != nil {
			l.overlaps++
		}
	}
	l.current[me] = c
	return nil
}

func (d *Driver) CtxGetCurrent() (cuda.Context, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.getCurrent(osthread.ID())
}

// getCurrent is cuCtxGetCurrent on thread me. The caller holds d.mu.
func (d *Driver) getCurrent(me int) (cuda.Context, error) {
	if err := d.enter("cuCtxGetCurrent"); err != nil {
		return 0, err
	}
	c := d.lib().current[me]
	if x := d.contexts[c]; x != nil && x.destroyed {
		return 0, cuda.Check("cuCtxGetCurrent", cuda.ErrorContextIsDestroyed)
	}
	return c, nil
}

// capturing reports the capture in progress on a stream of context c in
// global mode, if any; an unsafe call (a synchronous allocation or copy)
// made then fails and invalidates it, as on the real driver. The caller
// holds d.mu.
func (d *Driver) refuseDuringCapture(op string, c cuda.Context) error {
	for _, st := range d.streams {
		if st.capture != nil && st.capture.mode == cuda.CaptureModeGlobal && st.ctx == c {
			if st.capture.invalid == 0 {
				st.capture.invalid = cuda.ErrorStreamCaptureInvalidated
			}
			return cuda.Check(op, cuda.ErrorStreamCaptureUnsupported)
		}
	}
	return nil
}

// record captures a launch on a capturing stream instead of running it.
func (st *streamInfo) record(o graphOp) {
	o.args, o.offs = slices.Clone(o.args), slices.Clone(o.offs)
	st.capture.ops = append(st.capture.ops, o)
}

func (d *Driver) StreamBeginCapture(c cuda.Context, s cuda.Stream, mode int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuStreamBeginCapture_v2"
	if _, err := d.ctx(op, c); err != nil {
		return err
	}
	if s == 0 {
		return cuda.Check(op, cuda.ErrorStreamCaptureUnsupported) // the legacy stream cannot be captured
	}
	if mode < cuda.CaptureModeGlobal || mode > cuda.CaptureModeRelaxed {
		return cuda.Check(op, cuda.ErrorInvalidValue)
	}
	st, err := d.stream(op, s)
	if err != nil {
		return err
	}
	if st.capture != nil {
		return cuda.Check(op, cuda.ErrorIllegalState)
	}
	st.capture = &capture{mode: mode}
	return nil
}

func (d *Driver) StreamEndCapture(c cuda.Context, s cuda.Stream) (cuda.Graph, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuStreamEndCapture"
	if _, err := d.ctx(op, c); err != nil {
		return 0, err
	}
	if s == 0 {
		return 0, cuda.Check(op, cuda.ErrorIllegalState)
	}
	st, err := d.stream(op, s)
	if err != nil {
		return 0, err
	}
	cp := st.capture
	if cp == nil {
		return 0, cuda.Check(op, cuda.ErrorIllegalState)
	}
	st.capture = nil
	if cp.invalid != 0 {
		return 0, cuda.Check(op, cp.invalid)
	}
	h := cuda.Graph(d.handle())
	d.lib().graphs[h] = &graph{ctx: st.ctx, ops: cp.ops}
	return h, nil
}

func (d *Driver) GraphInstantiate(c cuda.Context, g cuda.Graph) (cuda.GraphExec, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuGraphInstantiateWithFlags"
	if _, err := d.ctx(op, c); err != nil {
		return 0, err
	}
	gr := d.lib().graphs[g]
	if gr == nil {
		return 0, cuda.Check(op, cuda.ErrorInvalidValue)
	}
	h := cuda.GraphExec(d.handle())
	ops := slices.Clone(gr.ops)
	for i := range ops {
		if ops[i].name == SMIDKernel && d.kernels[SMIDKernel] == nil {
			// An executable graph runs on the SMs of the context it was
			// instantiated in, whatever stream launches it (sms.go).
			ops[i].kernel = d.smid(d.ctxSMs(c))
		}
	}
	d.lib().execs[h] = &graph{ctx: gr.ctx, ops: ops}
	return h, nil
}

// GraphLaunch replays the recorded work on s, in stream order like a
// launch (queue.go), counting each kernel as a launch on s. A kernel held
// by HoldKernel holds the whole replay.
func (d *Driver) GraphLaunch(c cuda.Context, e cuda.GraphExec, s cuda.Stream) error {
	d.mu.Lock()
	const op = "cuGraphLaunch"
	if c != 0 || s == 0 {
		if _, err := d.ctx(op, c); err != nil {
			d.mu.Unlock()
			return err
		}
	} else if err := d.enter(op); err != nil {
		d.mu.Unlock()
		return err
	}
	ex := d.lib().execs[e]
	if ex == nil {
		d.mu.Unlock()
		return cuda.Check(op, cuda.ErrorInvalidValue)
	}
	st, err := d.stream(op, s)
	if err != nil {
		d.mu.Unlock()
		return err
	}
	if st.capture != nil {
		// Launching a graph into a capture nests it; record its work.
		for _, o := range ex.ops {
			st.record(o)
		}
		d.mu.Unlock()
		return nil
	}
	ops := ex.ops // never changed once instantiated
	var holds []*hold
	for _, o := range ops {
		if o.memset == nil {
			st.launches++
			d.launches++
			d.modelLaunch(st, o.name, o.grid, o.block) // a replayed kernel takes its modelled time, as launched
			holds = append(holds, d.holdsFor(o.name, o.args, o.offs)...)
		}
	}
	if runsNow(st) && len(holds) == 0 {
		seq := d.begin(st) // runs here, as a launch does (queue.go)
		d.mu.Unlock()
		err = replay(ops, &d.mem)
		d.mu.Lock()
		d.end(st, seq)
		d.mu.Unlock()
	} else {
		err = d.submit(st, &work{holds: holds, run: func(mem *Memory) error { return replay(ops, mem) }}) // unlocks d.mu
	}
	if err != nil {
		return cuda.Check(op, cuda.ErrorIllegalAddress)
	}
	return nil
}

// replay runs a graph's work in order.
func replay(ops []graphOp, mem *Memory) error {
	for _, o := range ops {
		if err := o.run(mem); err != nil {
			return err
		}
	}
	return nil
}

func (o graphOp) run(mem *Memory) error {
	if o.memset != nil {
		return o.memset(mem)
	}
	if o.kernel == nil {
		return nil
	}
	return o.kernel(mem, o.grid, o.block, o.args, o.offs)
}

func (d *Driver) GraphExecDestroy(c cuda.Context, e cuda.GraphExec) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuGraphExecDestroy"
	if _, err := d.ctx(op, c); err != nil {
		return err
	}
	if d.lib().execs[e] == nil {
		return cuda.Check(op, cuda.ErrorInvalidValue)
	}
	delete(d.libs.execs, e)
	return nil
}

func (d *Driver) GraphDestroy(c cuda.Context, g cuda.Graph) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuGraphDestroy"
	if _, err := d.ctx(op, c); err != nil {
		return err
	}
	if d.lib().graphs[g] == nil {
		return cuda.Check(op, cuda.ErrorInvalidValue)
	}
	delete(d.libs.graphs, g)
	return nil
}

func (d *Driver) MemsetD16Async(c cuda.Context, p cuda.DevicePtr, v uint16, n uint64, s cuda.Stream) error {
	return d.memset("cuMemsetD16Async", c, p, n, 2, uint32(v), s)
}

func (d *Driver) MemsetD32Async(c cuda.Context, p cuda.DevicePtr, v uint32, n uint64, s cuda.Stream) error {
	return d.memset("cuMemsetD32Async", c, p, n, 4, v, s)
}

// memset fills in stream order (queue.go), outside the driver's lock.
func (d *Driver) memset(op string, c cuda.Context, p cuda.DevicePtr, n, width uint64, v uint32, s cuda.Stream) error {
	d.mu.Lock()
	if _, err := d.ctx(op, c); err != nil {
		d.mu.Unlock()
		return err
	}
	st, err := d.stream(op, s)
	if err != nil {
		d.mu.Unlock()
		return err
	}
	if p%cuda.DevicePtr(width) != 0 {
		d.mu.Unlock()
		return cuda.Check(op, cuda.ErrorInvalidValue)
	}
	if _, ok := d.mem.slice(p, n*width); !ok {
		d.mu.Unlock()
		return cuda.Check(op, cuda.ErrorInvalidValue)
	}
	fill := func(m *Memory) error {
		b, ok := m.slice(p, n*width)
		if !ok {
			return cuda.ErrorIllegalAddress
		}
		for i := uint64(0); i < n; i++ {
			for j := uint64(0); j < width; j++ {
				b[i*width+j] = byte(v >> (8 * j)) // little-endian, as the device stores it
			}
		}
		return nil
	}
	if st.capture != nil {
		st.record(graphOp{name: op, memset: fill})
		d.mu.Unlock()
		return nil
	}
	return d.submit(st, &work{run: fill}) // unlocks d.mu
}
