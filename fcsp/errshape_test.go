package fcsp

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// Issue 40: errors were made in thirty places: "tenant %q" formatted at 30
// sites of 12 files, and wrap matched an error's text so as not to prefix
// twice. One file names tenants (errors.go: TenantError, the one helper
// that makes it, and the name of another tenant in a message); no code of
// fcsp or internal reads an error's text to decide anything.
func TestTenantIsNamedInOneFile(t *testing.T) {
	matched := []*regexp.Regexp{
		regexp.MustCompile(`strings\.\w+\([^;{]*\.Error\(\)`), // strings.Contains(err.Error(), ...)
		regexp.MustCompile(`\.Error\(\)\s*(==|!=)`),
		regexp.MustCompile(`(==|!=)\s*[\w.]+\.Error\(\)`),
		regexp.MustCompile(`regexp\.[^;{]*\.Error\(\)`),
		regexp.MustCompile(`\.Match(String)?\([^;{]*\.Error\(\)`),
	}
	var files int
	for _, dir := range []string{".", "../internal"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files++
			for i, line := range strings.Split(string(b), "\n") {
				code, _, _ := strings.Cut(line, "//")
				if strings.Contains(code, `tenant %q`) && path != "errors.go" {
					t.Errorf("%s:%d formats a tenant's name; TenantError and tenantName (errors.go) do: %s", path, i+1, strings.TrimSpace(line))
				}
				for _, re := range matched {
					if re.MatchString(code) {
						t.Errorf("%s:%d matches an error's text; match its identity (errors.Is) or type (errors.As): %s", path, i+1, strings.TrimSpace(line))
					}
				}
			}
			return nil
		})
		require.NoError(t, err)
	}
	require.Greater(t, files, 100, "the scan read fcsp's and internal's files")
}

// Issue 38 #3: a nil context panicked in Open, Alloc, FreeContext,
// AllocWorkspace, SynchronizeContext and a rate-limited tenant's Launch
// (an unlimited one's worked), while Do, Scope, Shutdown and WithContext
// answered ErrInvalidArgument. Every call taking a context answers a nil
// one with ErrInvalidArgument, saying what to pass.
func TestNilContextIsInvalidArgumentEverywhere(t *testing.T) {
	var nilCtx context.Context
	ctx := context.Background()
	p, _ := openSim(t)
	plain, err := p.NewTenant("plain", WithSMs(8))
	require.NoError(t, err)
	limited, err := p.NewTenant("limited", WithSMs(8), WithSMLimit(0.5))
	require.NoError(t, err)
	fn, fl := spinKernel(t, plain), spinKernel(t, limited)
	var a Args
	a.Uint64(0)
	one := Dim3{X: 1, Y: 1, Z: 1}
	var g *Graph
	g, err = plain.Stream().Capture(ctx, func() error { return plain.Stream().Launch(ctx, fn, one, one, 0, &a) })
	require.NoError(t, err)
	exec, err := g.Instantiate()
	require.NoError(t, err)
	res, err := limited.Stream().Reserve(fl, one, one)
	require.NoError(t, err)
	ok := func(Current) error { return nil }

	for name, call := range map[string]func() error{
		"Open":                      func() error { _, err := Open(nilCtx, 0, simulatorOption()); return err },
		"Pool.ProbeSMs":             func() error { _, err := p.ProbeSMs(nilCtx); return err },
		"Pool.Shutdown":             func() error { return p.Shutdown(nilCtx) },
		"NewTenant(WithContext)":    func() error { _, err := p.NewTenant("x", WithContext(nilCtx)); return err },
		"Alloc":                     func() error { _, err := plain.Alloc(nilCtx, 1); return err },
		"FreeContext":               func() error { return plain.FreeContext(nilCtx, 0x1234) },
		"AllocWorkspace":            func() error { _, err := plain.AllocWorkspace(nilCtx, nil, 1); return err },
		"Stream.SynchronizeContext": func() error { return plain.Stream().SynchronizeContext(nilCtx) },
		"Stream.Launch, unlimited":  func() error { return plain.Stream().Launch(nilCtx, fn, one, one, 0, &a) },
		"Stream.Launch, limited":    func() error { return limited.Stream().Launch(nilCtx, fl, one, one, 0, &a) },
		"Reservation.Launch":        func() error { return res.Launch(nilCtx, 0, &a) },
		"Stream.Capture":            func() error { _, err := plain.Stream().Capture(nilCtx, func() error { return nil }); return err },
		"Stream.LaunchGraph":        func() error { return plain.Stream().LaunchGraph(nilCtx, exec) },
		"Do":                        func() error { return plain.Do(nilCtx, ok) },
		"TryDo":                     func() error { return plain.TryDo(nilCtx, ok) },
		"DoEach":                    func() error { return plain.DoEach(nilCtx, ok) },
		"Scope":                     func() error { return plain.Scope(nilCtx, func(*Scope) error { return nil }) },
		"Reshape":                   func() error { return plain.Reshape(nilCtx, 8) },
		"Shutdown":                  func() error { return plain.Shutdown(nilCtx) },
	} {
		err := noPanic(call)
		if assert.ErrorIs(t, err, ErrInvalidArgument, name) {
			assert.ErrorContains(t, err, "nil context.Context", name)
			assert.ErrorContains(t, err, "context.Background()", name+": the message says what to pass")
		}
	}
	require.Equal(t, []string{"limited", "plain"}, p.Tenants(), "a refused call closed nothing")

	// A zero Option or TenantOption (what a nil one was while they were
	// funcs), wherever it stands, is refused too.
	for _, opts := range [][]Option{{{}}, {simulatorOption(), {}}, {{}, simulatorOption()}} {
		err := noPanic(func() error { _, err := Open(ctx, 0, opts...); return err })
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.ErrorContains(t, err, "is the zero value")
	}
	for _, opts := range [][]TenantOption{{{}}, {WithSMs(8), {}}, {{}, WithSMs(8)}} {
		err := noPanic(func() error { _, err := p.NewTenant("zero", opts...); return err })
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.ErrorContains(t, err, "is the zero value")
	}
}

// simulatorOption is the simulator openSim uses.
func simulatorOption() Option { return simulator(fake.H200()) }

// noPanic is f's error, or a panic in f as an error.
func noPanic(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panicked: %v", r)
		}
	}()
	return f()
}

// Issue 40 and 38 #14: one error shape. A tenant's call fails with a
// *TenantError, "tenant \"t\": Op: cause", naming the tenant and the call
// once (a lost device's message named its entry point twice), whose cause
// carries the sentinels; the cause names no tenant and no internal
// package. Sizes say by how much and never read as an exponent; a tenant
// without a quota is not refused for passing one; CUDA 200 and 500 have
// sentinels.
func TestOneErrorShape(t *testing.T) {
	ctx := context.Background()
	p, drv := openSim(t, WithDeviceMemoryLimit(16<<30))
	a, err := p.NewTenant("a", WithSMs(8), WithMemoryQuota(1<<20))
	require.NoError(t, err)
	b, err := p.NewTenant("b", WithSMs(8))
	require.NoError(t, err)

	shaped := func(err error, tenant, op string, is ...error) {
		t.Helper()
		var te *TenantError
		require.ErrorAs(t, err, &te)
		require.Equal(t, tenant, te.Tenant)
		require.Equal(t, op, te.Op)
		msg := err.Error()
		prefix := fmt.Sprintf("tenant %q: %s: ", tenant, op)
		require.True(t, strings.HasPrefix(msg, prefix), "%q does not begin %q", msg, prefix)
		require.Equal(t, 1, strings.Count(msg, fmt.Sprintf("tenant %q", tenant))-strings.Count(msg, fmt.Sprintf("first seen by tenant %q", tenant)),
			"the tenant named once (a lost device's record says whose call saw it first): %s", msg)
		require.Equal(t, 1, strings.Count(msg, op+":"), "the call named once: %s", msg)
		for _, inner := range []string{"memtrack:", "hamienv:", "shm:", "devmem:", "graphs:", "admission:"} {
			require.NotContains(t, msg, inner)
		}
		for _, target := range is {
			require.ErrorIs(t, err, target)
		}
	}

	_, err = a.Alloc(ctx, 2<<20)
	shaped(err, "a", "Alloc", ErrQuotaExceeded)
	_, err = a.Alloc(ctx, 0)
	shaped(err, "a", "Alloc", ErrInvalidArgument)
	shaped(a.Free(0x1234), "a", "Free", ErrUnknownPointer)
	_, err = a.AllocAsync(b.Stream(), 1)
	shaped(err, "a", "AllocAsync", ErrInvalidArgument)
	require.ErrorContains(t, err, `tenant "b"'s`, "the other tenant is named")
	_, err = p.NewTenant("a")
	shaped(err, "a", "NewTenant", ErrNameTaken)
	_, err = p.NewTenant("c", WithSMs(7))
	shaped(err, "c", "NewTenant", ErrGranularity)
	shaped(a.Reshape(ctx, 16), "a", "Reshape", ErrInvalidArgument)
	shaped(a.SetSMLimit(0.5), "a", "SetSMLimit", ErrInvalidArgument)
	shaped(a.Stream().Close(), "a", "Stream.Close", ErrInvalidArgument)

	// CUDA 200 and 500 have sentinels, and the kernel is named.
	_, err = a.LoadModule([]byte("neither PTX nor a cubin"))
	shaped(err, "a", "LoadModule", ErrInvalidImage)
	var ce *CUDAError
	require.ErrorAs(t, err, &ce)
	mod, err := a.LoadModule(kernels.ChainPTX)
	require.NoError(t, err)
	_, err = mod.Function("nope")
	shaped(err, "a", "Module.Function", ErrNotFound)
	require.ErrorContains(t, err, `kernel "nope"`)
	require.NotErrorIs(t, ErrInvalidImage, ErrNotFound)

	// A quota a byte over the device limit says so; uint64(-1) reads in
	// EiB and bytes, not 1.718e+10 GiB.
	_, err = p.NewTenant("over", WithMemoryQuota(16<<30+1))
	shaped(err, "over", "NewTenant", ErrInvalidArgument)
	require.ErrorContains(t, err, "memory quota 16 GiB (17179869185 bytes) is 1 byte over the device limit of 16 GiB")
	_, err = p.NewTenant("huge", WithMemoryQuota(math.MaxUint64))
	shaped(err, "huge", "NewTenant", ErrInvalidArgument)
	require.ErrorContains(t, err, "16 EiB (18446744073709551615 bytes)")
	require.NotContains(t, err.Error(), "e+")

	// A tenant without a quota of its own, pooled or plain, is refused by
	// the device's limit, and told so, not that it passed a tenant limit.
	for _, opts := range [][]TenantOption{nil, {WithoutMemoryPool()}} {
		n, err := p.NewTenant("noquota", opts...)
		require.NoError(t, err)
		_, err = n.Alloc(ctx, 16<<30+1)
		shaped(err, "noquota", "Alloc", ErrQuotaExceeded)
		require.ErrorContains(t, err, "would exceed the device limit")
		require.ErrorContains(t, err, "no memory quota of its own (WithMemoryQuota gives it one)")
		require.NotContains(t, err.Error(), "tenant limit")
		require.NoError(t, n.Close())
	}

	// What the pool's own calls answer carries the package's prefix.
	_, err = openSimErr(-1)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.True(t, strings.HasPrefix(err.Error(), "fcsp: "), err.Error())

	// A lost device: the entry point named once, the tenant prefixed once.
	fn := spinKernel(t, b)
	drv.InjectFault(0, cuda.ErrorIllegalAddress)
	var args Args
	args.Uint64(0)
	one := Dim3{X: 1, Y: 1, Z: 1}
	_ = b.Stream().Launch(ctx, fn, one, one, 0, &args)
	_ = b.Stream().Synchronize()
	_, err = b.Alloc(ctx, 1)
	shaped(err, "b", "Alloc", ErrDeviceLost)
	require.Equal(t, 1, strings.Count(err.Error(), "cuLaunchKernel"), err.Error())
	var lost *DeviceLostError
	require.ErrorAs(t, err, &lost)
	require.Equal(t, "cuLaunchKernel", lost.Op)
}

// A lost device's message names the driver call once (it read
// "cuGraphLaunch: ... from cuGraphLaunch"), and the call that saw it where
// that was another; where it was first seen; and what to do.
func TestDeviceLostSaysItOnce(t *testing.T) {
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	illegal := &CUDAError{Op: "cuGraphLaunch", Code: cuda.ErrorIllegalAddress}
	for _, c := range []struct {
		e    DeviceLostError
		want string
	}{
		{DeviceLostError{Err: illegal, Op: "cuGraphLaunch", At: at},
			"CUDA_ERROR_ILLEGAL_ADDRESS (700) from cuGraphLaunch, first seen outside any tenant at 2026-12-04T10:00:00Z;"},
		{DeviceLostError{Err: illegal, Op: "cuGraphLaunch", Tenant: "a", At: at},
			`CUDA_ERROR_ILLEGAL_ADDRESS (700) from cuGraphLaunch, first seen by tenant "a" at 2026-12-04T10:00:00Z;`},
		{DeviceLostError{Err: illegal, Op: "cuGraphLaunch", Tenant: "a", Stream: 0x10, At: at},
			`from cuGraphLaunch, first seen by tenant "a" on stream 0x10 at`},
		{DeviceLostError{Err: illegal, Op: "cleanup", At: at},
			"CUDA_ERROR_ILLEGAL_ADDRESS (700) from cuGraphLaunch (cleanup), first seen outside any tenant"},
	} {
		m := c.e.Error()
		require.True(t, strings.HasPrefix(m, "fcsp: device lost: "), m)
		require.Contains(t, m, c.want)
		require.Equal(t, 1, strings.Count(m, "cuGraphLaunch"), m)
		require.True(t, strings.HasSuffix(m, "restart the process"), m)
	}
	require.NotPanics(t, func() { _ = new(DeviceLostError).Error() }, "a zero DeviceLostError")
}
