package smpart_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// remainderRow is one line of testdata/h200-remainder-probe.tsv: a split at
// MinCount with Flags, a green context built from its first Groups groups
// and (if Remainder) its remaining resource, holding SMs.
type remainderRow struct {
	Flags     uint32
	MinCount  int
	Groups    int
	Remainder bool
	SMs       int
}

func readRemainderProbe(t *testing.T) []remainderRow {
	t.Helper()
	f, err := os.Open("../../testdata/h200-remainder-probe.tsv")
	require.NoError(t, err)
	defer f.Close()
	var rows []remainderRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "flags") {
			continue
		}
		var r remainderRow
		var rem int
		_, err := fmt.Sscanf(line, "%d\t%d\t%d\t%d\t%d", &r.Flags, &r.MinCount, &r.Groups, &rem, &r.SMs)
		require.NoError(t, err, line)
		r.Remainder = rem == 1
		rows = append(rows, r)
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, rows)
	return rows
}

// probeRemainder splits the device's SM resource at minCount with flags,
// builds a green context from groups groups and (if rem) the remainder, and
// reads back its SM count; everything is destroyed again.
func probeRemainder(drv cuda.Driver, dev cuda.Device, flags uint32, minCount, groups int, rem bool) (sms int, err error) {
	res, err := drv.DeviceGetDevResource(dev, cuda.ResourceSM)
	if err != nil {
		return 0, err
	}
	all, remRes, n, err := drv.DevSmResourceSplitByCount(res, flags, uint32(minCount), int(res.SMCount()))
	if err != nil {
		return 0, err
	}
	if groups > n {
		return 0, fmt.Errorf("asked for %d groups of a split that made %d", groups, n)
	}
	in := append([]cuda.DevResource(nil), all[:groups]...)
	if rem {
		in = append(in, remRes)
	}
	desc, err := drv.DevResourceGenerateDesc(in)
	if err != nil {
		return 0, err
	}
	g, err := drv.GreenCtxCreate(desc, dev, cuda.GreenCtxDefaultStream)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, drv.GreenCtxDestroy(g)) }()
	got, err := drv.GreenCtxGetDevResource(g, cuda.ResourceSM)
	return int(got.SMCount()), err
}

// The fake replays every measured row.
func TestFakeReplaysRemainderProbe(t *testing.T) {
	drv := fake.New(fake.H200())
	for _, r := range readRemainderProbe(t) {
		sms, err := probeRemainder(drv, 0, r.Flags, r.MinCount, r.Groups, r.Remainder)
		require.NoError(t, err)
		require.Equal(t, r.SMs, sms, "%+v", r)
	}
	require.Zero(t, drv.Live().GreenCtxs)
}

// TestGPURemainderProbe asserts the measured rows on an H200 and, where
// FCSP_PROBE_OUT names a folder, writes the whole grid (every group count,
// with and without the remainder, both split flags, split by 8).
func TestGPURemainderProbe(t *testing.T) {
	drv := realDriver(t)
	dev, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	defer dev.Close()
	name, _ := drv.DeviceName(dev.Ordinal())
	if strings.Contains(name, "H200") {
		for _, r := range readRemainderProbe(t) {
			sms, err := probeRemainder(drv, dev.Ordinal(), r.Flags, r.MinCount, r.Groups, r.Remainder)
			require.NoError(t, err, "%+v", r)
			require.Equal(t, r.SMs, sms, "%+v", r)
		}
	}
	out := os.Getenv("FCSP_PROBE_OUT")
	if out == "" {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: %s; API %d\nflags\tminCount\tgroups\tremainder\tSMs\trc\n", name, dev.Info(), dev.APIVersion())
	for _, flags := range []uint32{0, cuda.SplitIgnoreCoscheduling} {
		m := dev.Granularity()
		_, _, n, err := drv.DevSmResourceSplitByCount(mustRes(t, drv, dev), flags, uint32(m), 0)
		require.NoError(t, err)
		for g := 0; g <= n; g++ {
			for _, rem := range []bool{false, true} {
				if g == 0 && !rem {
					continue
				}
				sms, err := probeRemainder(drv, dev.Ordinal(), flags, m, g, rem)
				fmt.Fprintf(&b, "%d\t%d\t%d\t%d\t%d\t%v\n", flags, m, g, b2i(rem), sms, err)
			}
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(out, "remainder-probe.tsv"), []byte(b.String()), 0o644))
}

func mustRes(t *testing.T, drv cuda.Driver, dev *smpart.Device) cuda.DevResource {
	res, err := drv.DeviceGetDevResource(dev.Ordinal(), cuda.ResourceSM)
	require.NoError(t, err)
	return res
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
