package main

import (
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/examples/workload"
	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// syncEvery is how many launches are queued between synchronisations.
const syncEvery = 1024

// launch times a 1x1 "spin" kernel (zero cycles) launched through a tenant
// stream against cuLaunchKernel on a plain stream of the primary context,
// synchronising every syncEvery launches on both sides.
func (b *bench) launch() error {
	n := b.n(20*syncEvery, 2*syncEvery)
	pool, err := b.open()
	if err != nil {
		return err
	}
	defer pool.Close()
	raw, err := b.openRaw()
	if err != nil {
		return err
	}
	defer raw.close()
	rawLaunch, cleanup, err := raw.spinLauncher()
	if err != nil {
		return err
	}
	defer cleanup()
	if _, err := timePer(syncEvery, rawLaunch); err != nil { // warm-up
		return err
	}
	b.logf("launch: %d raw launches", n)
	rawNs, err := timePer(n, rawLaunch)
	if err != nil {
		return fmt.Errorf("raw launch: %w", err)
	}
	for _, c := range []struct {
		metric string
		opts   []fcsp.TenantOption
	}{
		{fmt.Sprintf("launch 1x1 kernel, tenant %d SMs", tenantSMs), []fcsp.TenantOption{fcsp.WithSMs(tenantSMs)}},
		{"launch 1x1 kernel, tenant unpartitioned", nil},
	} {
		ns, err := b.tenantLaunches(pool, n, c.opts...)
		if err != nil {
			return fmt.Errorf("%s: %w", c.metric, err)
		}
		b.addTime(Row{Section: "launch", Metric: c.metric, Against: "raw cuLaunchKernel, primary context stream",
			Note: fmt.Sprintf("mean of %d, sync every %d", n, syncEvery), DriverBound: true}, ns, rawNs)
	}
	return nil
}

// tenantLaunches makes a tenant and returns the mean nanoseconds per
// launch of n spin launches on its stream, after a warm-up.
func (b *bench) tenantLaunches(pool *fcsp.Pool, n int, opts ...fcsp.TenantOption) (ns float64, err error) {
	t, err := pool.NewTenant("bench", opts...)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, t.Close()) }()
	launch, err := tenantSpinLauncher(b, t)
	if err != nil {
		return 0, err
	}
	if _, err := timePer(syncEvery, launch); err != nil {
		return 0, err
	}
	return timePer(n, launch)
}

// tenantSpinLauncher returns a function that launches spin(0) on the
// tenant's stream, synchronising every syncEvery-th call.
func tenantSpinLauncher(b *bench, t *fcsp.Tenant) (func(int) error, error) {
	fn, err := workload.Kernel(t, "spin")
	if err != nil {
		return nil, err
	}
	var args fcsp.Args
	args.Uint64(0)
	one := fcsp.Dim3{X: 1, Y: 1, Z: 1}
	s := t.Stream()
	return func(i int) error {
		if err := s.Launch(b.ctx, fn, one, one, 0, &args); err != nil {
			return err
		}
		if (i+1)%syncEvery == 0 {
			return s.Synchronize()
		}
		return nil
	}, nil
}

// spinLauncher is tenantSpinLauncher on the raw driver: a module and a
// non-blocking stream in the primary context.
func (r *rawDriver) spinLauncher() (launch func(int) error, cleanup func(), err error) {
	d, c := r.drv, r.primary
	mod, err := d.ModuleLoadData(c, kernels.ChainPTX)
	if err != nil {
		return nil, nil, err
	}
	fn, err := d.ModuleGetFunction(c, mod, "spin")
	if err != nil {
		return nil, nil, errors.Join(err, d.ModuleUnload(c, mod))
	}
	s, err := d.StreamCreate(c, cuda.StreamNonBlocking)
	if err != nil {
		return nil, nil, errors.Join(err, d.ModuleUnload(c, mod))
	}
	var args cuda.Args
	args.Uint64(0)
	one := cuda.Dim3{X: 1, Y: 1, Z: 1}
	launch = func(i int) error {
		if err := d.LaunchKernel(c, fn, one, one, 0, s, &args); err != nil {
			return err
		}
		if (i+1)%syncEvery == 0 {
			return d.StreamSynchronize(c, s)
		}
		return nil
	}
	cleanup = func() {
		_ = d.StreamSynchronize(c, s)
		_ = d.StreamDestroy(c, s)
		_ = d.ModuleUnload(c, mod)
	}
	return launch, cleanup, nil
}
