package greenctx_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
	"github.com/fcsp-go/fcsp-go/greenctx"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/driverhook"
)

// referenceMinCounts are the rows of testdata/h200-split.tsv.
var referenceMinCounts = []int{1, 2, 4, 8, 9, 16, 24, 32, 64, 66}

func readSplitTable(t *testing.T, path string) []greenctx.Row {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var rows []greenctx.Row
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		var r greenctx.Row
		_, err := fmt.Sscanf(sc.Text(), "%d\t%d\t%d\t%d", &r.MinCount, &r.Groups, &r.GroupSMs, &r.Remainder)
		require.NoError(t, err)
		rows = append(rows, r)
	}
	require.NoError(t, sc.Err())
	require.Len(t, rows, len(referenceMinCounts))
	return rows
}

func openH200(t *testing.T) *greenctx.Device {
	t.Helper()
	dev, err := fcsptest.GreenDevice(fcsptest.H200())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, dev.Close()) })
	return dev
}

// openFake opens a simulated H200 whose driver the test can inspect
// (fcsptest.GreenDevice does the same without handing the driver out).
func openFake(t *testing.T) (*greenctx.Device, *fake.Driver) {
	t.Helper()
	drv := fake.New(fake.H200())
	d, err := driverhook.OpenGreen(drv, 0)
	require.NoError(t, err)
	return d.(*greenctx.Device), drv
}

// requireNothingLive fails if the driver still holds a green context, a
// stream or a reference to the primary context.
func requireNothingLive(t *testing.T, drv *fake.Driver) {
	t.Helper()
	live := drv.Live()
	require.Zero(t, live.GreenCtxs, "green contexts leaked")
	require.Zero(t, live.Streams, "streams leaked")
	require.Zero(t, live.PrimaryRefs, "primary context still retained")
}

func TestTableIsTheH200s(t *testing.T) {
	dev := openH200(t)
	require.Equal(t, 132, dev.SMs())
	require.Equal(t, 8, dev.Granularity())
	pred, meas, err := dev.Table(referenceMinCounts...)
	require.NoError(t, err)
	want := readSplitTable(t, "../testdata/h200-split.tsv")
	require.Equal(t, want, meas, "measured table differs from the H200's")
	require.Equal(t, want, pred, "predicted table differs from the H200's")
	for i, m := range referenceMinCounts {
		r, err := dev.Predict(m)
		require.NoError(t, err)
		require.Equal(t, want[i], r)
	}
}

func TestPartitionsAreDisjoint(t *testing.T) {
	dev, drv := openFake(t)
	s, err := dev.Split(8)
	require.NoError(t, err)
	require.Equal(t, 15, s.Groups())
	require.Equal(t, 8, s.GroupSMs())
	require.Equal(t, 12, s.Remainder())
	require.Equal(t, 132, s.FreeSMs())

	a, err := s.Take(16)
	require.NoError(t, err)
	b, err := s.Take(32)
	require.NoError(t, err)
	rem, err := s.TakeRemainder()
	require.NoError(t, err)
	rest, err := s.TakeRest()
	require.NoError(t, err)
	parts := []*greenctx.Partition{a, b, rem, rest}
	sizes := []int{16, 32, 12, 72}
	total := 0
	ctxs, streams := map[uintptr]bool{}, map[uintptr]bool{}
	for i, p := range parts {
		require.Equal(t, sizes[i], p.SMs(), "partition %d", i)
		total += p.SMs()
		require.NotZero(t, p.Context())
		require.NotZero(t, p.Stream())
		ctxs[p.Context()], streams[p.Stream()] = true, true
	}
	// Every SM in exactly one partition: they add up to the device, and
	// nothing is left to take.
	require.Equal(t, dev.SMs(), total)
	require.Len(t, ctxs, len(parts))
	require.Len(t, streams, len(parts))
	require.Zero(t, s.FreeSMs())
	_, err = s.Take(8)
	require.ErrorIs(t, err, greenctx.ErrInsufficientSMs)
	_, err = s.TakeRest()
	require.ErrorIs(t, err, greenctx.ErrInsufficientSMs)
	_, err = s.TakeRemainder()
	require.ErrorIs(t, err, greenctx.ErrInsufficientSMs)

	// Closing a partition gives exactly its SMs back, once.
	require.NoError(t, b.Close())
	require.NoError(t, b.Close())
	require.Zero(t, b.Context())
	require.Zero(t, b.Stream())
	require.Equal(t, 32, s.FreeSMs())
	c, err := s.Take(32)
	require.NoError(t, err)
	require.Equal(t, 32, c.SMs())

	// Closing the split closes what is left of its partitions.
	require.NoError(t, s.Close())
	for _, p := range []*greenctx.Partition{a, rem, rest, c} {
		require.Zero(t, p.Stream(), "%v outlived its split", p)
		require.NoError(t, p.Close())
	}
	_, err = s.Take(8)
	require.ErrorIs(t, err, greenctx.ErrClosed)
	require.NoError(t, s.Close())
	require.Equal(t, 1, drv.Live().PrimaryRefs)
	// The partitions' green contexts are kept for reuse while the device is
	// open (internal/smpart/greens.go); its close destroys them.
	require.NoError(t, dev.Close())
	requireNothingLive(t, drv)
}

func TestBadInputIsTyped(t *testing.T) {
	dev := openH200(t)
	s, err := dev.Split(8)
	require.NoError(t, err)
	defer s.Close()
	for _, sms := range []int{12, 0, -8, 1} {
		_, err := s.Take(sms)
		require.ErrorIs(t, err, greenctx.ErrGranularity, "Take(%d)", sms)
		require.ErrorIs(t, s.Check(sms), greenctx.ErrGranularity, "Check(%d)", sms)
	}
	_, err = s.Take(12)
	require.ErrorContains(t, err, "groups of 8 (try 8 or 16)")
	_, err = s.Take(128)
	require.ErrorIs(t, err, greenctx.ErrInsufficientSMs)
	require.ErrorContains(t, err, "120 of 120 partitionable SMs are free")
	for _, m := range []int{0, -1, 133} {
		_, err := dev.Split(m)
		require.ErrorIs(t, err, greenctx.ErrInvalidArgument, "Split(%d)", m)
		require.ErrorContains(t, err, "ask for 1 to 132")
		_, err = dev.Predict(m)
		require.ErrorIs(t, err, greenctx.ErrInvalidArgument, "Predict(%d)", m)
		p, q, err := dev.Table(8, m)
		require.ErrorIs(t, err, greenctx.ErrInvalidArgument, "Table(8, %d)", m)
		require.Nil(t, p)
		require.Nil(t, q)
	}
	_, err = greenctx.Open(-1)
	require.ErrorIs(t, err, greenctx.ErrInvalidArgument)
	// Nothing was taken by the refusals.
	require.Equal(t, 132, s.FreeSMs())
}

// The sentinels are the module's: one identity per meaning.
func TestSentinelsAreFcsps(t *testing.T) {
	require.Equal(t, fcsp.ErrGranularity, greenctx.ErrGranularity)
	require.Equal(t, fcsp.ErrInsufficientSMs, greenctx.ErrInsufficientSMs)
	require.Equal(t, fcsp.ErrClosed, greenctx.ErrClosed)
	require.Equal(t, fcsp.ErrNoDriver, greenctx.ErrNoDriver)
	require.Equal(t, fcsp.ErrNotAvailable, greenctx.ErrNotAvailable)
	require.Equal(t, fcsp.ErrInvalidArgument, greenctx.ErrInvalidArgument)
}

func TestOpenWithoutDriver(t *testing.T) {
	dev, err := greenctx.Open(0)
	if err == nil {
		dev.Close()
		t.Skip("a driver is present")
	}
	require.ErrorIs(t, err, greenctx.ErrNoDriver)
	require.Nil(t, dev)
}

func TestClosedDevice(t *testing.T) {
	dev, drv := openFake(t)
	s, err := dev.Split(8)
	require.NoError(t, err)
	p, err := s.Take(16)
	require.NoError(t, err)
	require.NoError(t, dev.Close())
	require.NoError(t, dev.Close())
	require.Zero(t, p.Context(), "a partition outlived its device")
	require.NoError(t, p.Close())
	_, err = s.Take(8)
	require.ErrorIs(t, err, greenctx.ErrClosed)
	_, err = s.TakeRest()
	require.ErrorIs(t, err, greenctx.ErrClosed)
	_, err = dev.Split(8)
	require.ErrorIs(t, err, greenctx.ErrClosed)
	_, _, err = dev.Table(8)
	require.ErrorIs(t, err, greenctx.ErrClosed)
	_, err = dev.Predict(8)
	require.ErrorIs(t, err, greenctx.ErrClosed)
	require.NoError(t, s.Close())
	requireNothingLive(t, drv)
}

// Close races every call: each call either succeeds or says ErrClosed, and
// once the device is closed no partition taken from it is left open.
func TestCloseRacesTake(t *testing.T) {
	dev, drv := openFake(t)
	s, err := dev.Split(8)
	require.NoError(t, err)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		parts []*greenctx.Partition
	)
	start := make(chan struct{})
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := 0; ; i++ {
				var p *greenctx.Partition
				var err error
				switch (g + i) % 4 {
				case 0:
					p, err = s.Take(8)
				case 1:
					p, err = s.TakeRest()
				case 2:
					var ns *greenctx.Split
					if ns, err = dev.Split(16); err == nil {
						p, err = ns.Take(16)
					}
				case 3:
					_, _, err = dev.Table(8)
				}
				if errors.Is(err, greenctx.ErrClosed) {
					return
				}
				if err != nil && !errors.Is(err, greenctx.ErrInsufficientSMs) {
					t.Errorf("unexpected error: %v", err)
					return
				}
				if p != nil {
					mu.Lock()
					parts = append(parts, p)
					mu.Unlock()
					if i%3 == 0 {
						if err := p.Close(); err != nil {
							t.Errorf("Close: %v", err)
						}
					}
				}
			}
		}()
	}
	close(start)
	wg.Add(1)
	go func() { defer wg.Done(); _ = s.Close() }()
	require.NoError(t, dev.Close())
	wg.Wait()
	for _, p := range parts {
		require.Zero(t, p.Stream(), "a partition taken from a closed device is still open")
		require.NoError(t, p.Close())
	}
	requireNothingLive(t, drv)
}
