package fcsp

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/nvml"
)

// The public types convert to the binding's at the boundary without
// changing a byte.
func TestPublicTypesConvertAtTheBoundary(t *testing.T) {
	var a Args
	a.Ptr(0x7f00_0000_1000).Int32(-3).Uint32(7).Uint64(1 << 40).Float32(0.5)
	var want cuda.Args
	want.Ptr(0x7f00_0000_1000).Int32(-3).Uint32(7).Uint64(1 << 40).Float32(0.5)
	require.Equal(t, want.Bytes(), a.a.Bytes())
	require.Equal(t, want.Offsets(), a.a.Offsets())
	require.Equal(t, 5, a.Len())
	require.Zero(t, a.Reset().Len())

	d := Dim3{X: 2, Y: 3, Z: 4}
	require.Equal(t, cuda.Dim3{X: 2, Y: 3, Z: 4}, d.cuda())
	require.Equal(t, uint64(24), d.Count())
	require.False(t, Dim3{X: 1, Y: 0, Z: 1}.Valid())
	require.Equal(t, "0x1000", DevicePtr(0x1000).String())

	p, _ := openSim(t)
	pred, meas, err := p.SplitTable(8, 64)
	require.NoError(t, err)
	require.Equal(t, []SplitRow{{MinCount: 8, Groups: 15, GroupSMs: 8, Remainder: 12}, {MinCount: 64, Groups: 2, GroupSMs: 64, Remainder: 4}}, pred)
	require.Equal(t, pred, meas)
}

// NVMLFacts is the public copy of the NVML glue's facts: a field added there
// and not here would be dropped silently by Pool.NVML.
func TestNVMLFactsHasEveryField(t *testing.T) {
	pub, in := reflect.TypeOf(NVMLFacts{}), reflect.TypeOf(nvml.Facts{})
	require.Equal(t, in.NumField(), pub.NumField())
	for i := range in.NumField() {
		f, ok := pub.FieldByName(in.Field(i).Name)
		require.True(t, ok, "NVMLFacts lacks %s", in.Field(i).Name)
		require.Equal(t, in.Field(i).Type, f.Type, in.Field(i).Name)
	}
}
