package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
)

// server is the HTTP face of a pool with one tenant per request class.
type server struct {
	cfg         config
	log         *slog.Logger
	pool        *fcsp.Pool
	interactive *class
	batch       *class
	m           *metrics
	inflight    sync.WaitGroup // requests in handlers, waited for before the tenants close
}

// run serves on ln until ctx is done, then shuts down: stop accepting, let
// requests in flight finish (up to the shutdown timeout, after which their
// contexts are cancelled), close the tenants, then the pool.
func run(ctx context.Context, cfg config, ln net.Listener) (err error) {
	log := cfg.logger()
	pool, err := openPool(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, pool.Close()) }()
	s, err := newServer(pool, cfg, log)
	if err != nil {
		return err
	}
	// Requests get a base context of their own, cancelled only once the
	// graceful part of shutdown has run out, so that throttled launches
	// stop waiting then.
	reqCtx, cancelReqs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReqs()
	hs := s.httpServer(reqCtx)
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	log.Info("serving", "addr", ln.Addr().String(), "mode", cfg.Mode, "device", pool.Device().String(),
		"interactive", s.interactive.describe(), "batch", s.batch.describe())
	if cfg.onReady != nil {
		cfg.onReady(pool)
	}
	select {
	case <-ctx.Done():
		log.Info("shutting down", "cause", context.Cause(ctx).Error())
	case err := <-serveErr:
		return errors.Join(fmt.Errorf("serving: %w", err), s.close())
	}
	return errors.Join(s.shutdown(hs, cancelReqs), s.close())
}

// openPool opens the GPU, or the simulated H200 with -simulate or where no
// driver can be loaded.
func openPool(ctx context.Context, cfg config, log *slog.Logger) (*fcsp.Pool, error) {
	// HAMi's device plugin (and anyone else) sets CUDA_DEVICE_MEMORY_LIMIT
	// and CUDA_DEVICE_SM_LIMIT in the pod; the pool honours them.
	opts := []fcsp.Option{fcsp.WithLogger(log), fcsp.WithEnviron(os.Environ())}
	if cfg.PartitionUnit > 0 {
		opts = append(opts, fcsp.WithPartitionUnit(cfg.PartitionUnit))
	}
	if cfg.Simulate {
		return fcsp.Open(ctx, cfg.Device, append(opts, fcsptest.SimulatedH200())...)
	}
	pool, err := fcsp.Open(ctx, cfg.Device, opts...)
	if errors.Is(err, fcsp.ErrNoDriver) {
		log.Warn("no GPU driver; serving on the simulated H200 (kernels run in Go: keep sizes small)", "err", err)
		return fcsp.Open(ctx, cfg.Device, append(opts, fcsptest.SimulatedH200())...)
	}
	return pool, err
}

func newServer(pool *fcsp.Pool, cfg config, log *slog.Logger) (_ *server, err error) {
	sim := pool.Device().Simulated
	cfg.Interactive = cfg.Interactive.withSizes("interactive", sim)
	cfg.Batch = cfg.Batch.withSizes("batch", sim)
	iopts, bopts, err := tenantOptions(cfg, pool.Device().PartitionUnit, pool.Device().SMs)
	if err != nil {
		return nil, err
	}
	s := &server{cfg: cfg, log: log, pool: pool}
	s.m = newMetrics(pool)
	// The interactive tenant goes first: in partitioned mode the batch
	// tenant takes the rest of the SMs.
	if s.interactive, err = newClass(pool, "interactive", cfg.Interactive, cfg.Verify, s.m, log, iopts...); err != nil {
		return nil, fmt.Errorf("interactive tenant: %w", err)
	}
	if s.batch, err = newClass(pool, "batch", cfg.Batch, cfg.Verify, s.m, log, bopts...); err != nil {
		return nil, errors.Join(fmt.Errorf("batch tenant: %w", err), s.close())
	}
	s.interactive.gate, s.batch.gate = cfg.gate, cfg.gate
	s.m.reg.MustRegister(classCollector{s.interactive, s.batch})
	return s, nil
}

// tenantOptions turns the mode into each class's tenant options.
func tenantOptions(cfg config, unit, deviceSMs int) (interactive, batch []fcsp.TenantOption, err error) {
	// Every class allocates its request buffers in order on its lanes'
	// streams from a pool: after the first request of a size on a lane, no
	// driver call (cuMemFree would also wait for the whole device, the
	// other class's kernels included), in every mode alike.
	quota := func(q uint64) []fcsp.TenantOption {
		if q == 0 {
			return []fcsp.TenantOption{fcsp.WithMemoryPool(0)}
		}
		return []fcsp.TenantOption{fcsp.WithMemoryQuota(q), fcsp.WithMemoryPool(0)}
	}
	interactive, batch = quota(cfg.Interactive.Quota), quota(cfg.Batch.Quota)
	if cfg.Mode == modeShared {
		return interactive, batch, nil
	}
	limit := func(c classConfig) []fcsp.TenantOption {
		switch {
		case c.GPUShare > 0:
			return []fcsp.TenantOption{fcsp.WithGPUShare(c.GPUShare)}
		case c.SMLimit > 0:
			return []fcsp.TenantOption{fcsp.WithSMLimit(c.SMLimit)}
		}
		return nil
	}
	interactive = append(interactive, limit(cfg.Interactive)...)
	batch = append(batch, limit(cfg.Batch)...)
	// What green contexts do not split (the memory system, the clock): a
	// latency-critical class holds floored classes to their floor while its
	// requests are on the GPU.
	priority := func(c classConfig) []fcsp.TenantOption {
		var o []fcsp.TenantOption
		if c.LatencyCritical {
			o = append(o, fcsp.WithPriority(fcsp.LatencyCritical))
		}
		if c.BandwidthFloor > 0 {
			o = append(o, fcsp.WithBandwidthFloor(c.BandwidthFloor))
		}
		return o
	}
	interactive = append(interactive, priority(cfg.Interactive)...)
	batch = append(batch, priority(cfg.Batch)...)
	if cfg.Mode == modePartitioned {
		sms := cfg.Interactive.SMs
		if sms%unit != 0 || sms >= deviceSMs {
			return nil, nil, fmt.Errorf("-interactive-sms %d: partitions are made of groups of %d SMs on this device "+
				"(-partition-unit), so use a multiple of %d below the device's %d SMs (e.g. %d)",
				sms, unit, unit, deviceSMs, max(unit, sms/unit*unit))
		}
		interactive = append(interactive, fcsp.WithSMs(sms))
		batch = append(batch, fcsp.WithRestOfSMs())
	}
	return interactive, batch, nil
}

func (s *server) tenants() []*fcsp.Tenant {
	var ts []*fcsp.Tenant
	for _, c := range []*class{s.interactive, s.batch} {
		if c != nil {
			ts = append(ts, c.tenant)
		}
	}
	return ts
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/interactive", s.track(s.route(s.interactive)))
	mux.Handle("POST /v1/batch", s.track(s.route(s.batch)))
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{Registry: s.m.reg}))
	return mux
}

// The headers in which an inference gateway's endpoint picker passes a
// request's objective (the name of its InferenceObjective): llm-d-router's,
// which now ships the endpoint picker, and the Gateway API Inference
// Extension's, which it still reads as a deprecated alias.
const (
	objectiveHeader    = "x-llm-d-inference-objective"
	oldObjectiveHeader = "x-gateway-inference-objective"
)

// route serves a request in the class its objective header maps to
// (config.Objectives), else in own, the class of its route.
func (s *server) route(own *class) http.Handler {
	if len(s.cfg.Objectives) == 0 {
		return own
	}
	byObjective := map[string]*class{}
	for obj, name := range s.cfg.Objectives {
		byObjective[obj] = map[string]*class{"interactive": s.interactive, "batch": s.batch}[name]
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		obj := r.Header.Get(objectiveHeader)
		if obj == "" {
			obj = r.Header.Get(oldObjectiveHeader)
		}
		if c := byObjective[obj]; c != nil {
			c.ServeHTTP(w, r)
			return
		}
		own.ServeHTTP(w, r)
	})
}

// track counts requests in handlers so that the tenants are closed only
// after the last one has freed its memory.
func (s *server) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inflight.Add(1)
		defer s.inflight.Done()
		h.ServeHTTP(w, r)
	})
}

// health is what GET /healthz answers, so a load generator can label its
// results with the mode and device it measured.
type health struct {
	Status    string         `json:"status"`
	Mode      string         `json:"mode"`
	Device    string         `json:"device"`
	Simulated bool           `json:"simulated"`
	Classes   map[string]any `json:"classes"`
	Lost      string         `json:"lost,omitempty"` // the sticky fault, once the device is lost
}

// healthz answers 503 once the device is lost: the driver keeps a sticky
// fault until the process exits, so the liveness probe fails and the
// container is restarted (docs/DEPLOY.md).
func (s *server) healthz(w http.ResponseWriter, _ *http.Request) {
	if h := s.pool.Health(); h.RestartRequired {
		writeJSON(w, http.StatusServiceUnavailable, health{Status: "device lost", Mode: s.cfg.Mode,
			Device: s.pool.Device().String(), Simulated: s.pool.Device().Simulated, Lost: h.Lost.Error()})
		return
	}
	writeJSON(w, http.StatusOK, health{
		Status: "ok", Mode: s.cfg.Mode, Device: s.pool.Device().String(), Simulated: s.pool.Device().Simulated,
		Classes: map[string]any{"interactive": s.interactive.describe(), "batch": s.batch.describe()},
	})
}

func (s *server) httpServer(base context.Context) *http.Server {
	longest := max(time.Duration(s.cfg.Interactive.Timeout), time.Duration(s.cfg.Batch.Timeout))
	return &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		// Past the longest request deadline, so that a timed-out request
		// still gets its 503 written.
		WriteTimeout: longest + 5*time.Second,
		IdleTimeout:  60 * time.Second,
		BaseContext:  func(net.Listener) context.Context { return base },
		ErrorLog:     slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// shutdown stops accepting and waits for requests in flight; past the
// timeout it cancels them (a throttled launch stops waiting) and waits for
// their handlers to return.
func (s *server) shutdown(hs *http.Server, cancelReqs context.CancelFunc) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(s.cfg.ShutdownTimeout))
	defer cancel()
	err := hs.Shutdown(ctx)
	if err != nil {
		s.log.Warn("graceful shutdown timed out; cancelling requests in flight", "err", err)
		cancelReqs()
		err = hs.Close()
	}
	s.inflight.Wait()
	return err
}

// close closes the tenants and checks that none of them leaked memory or
// outlived the server.
func (s *server) close() error {
	var errs []error
	for _, t := range s.tenants() {
		if st := t.Stats(); st.MemoryUsed != 0 {
			errs = append(errs, fmt.Errorf("tenant %q still holds %d bytes at shutdown", st.Name, st.MemoryUsed))
		}
		errs = append(errs, t.Close())
	}
	if left := s.pool.Tenants(); len(left) > 0 {
		errs = append(errs, fmt.Errorf("tenants still open after shutdown: %q", left))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.log.Info("tenants closed", "pool_memory_used", s.pool.MemoryUsed())
	return nil
}

// describe is the class's setup, for logs and /healthz.
func (c *class) describe() map[string]any {
	st := c.tenant.Stats()
	return map[string]any{"n": c.cfg.N, "steps": c.cfg.Steps, "sms": st.SMs, "partitioned": st.Partitioned,
		"sm_limit": st.SMLimit, "quota": st.MemoryLimit, "streams": c.cfg.Streams, "timeout": c.cfg.Timeout.String()}
}
