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
	require.Equal(t, "0x1000", DevicePtr(0x1000).String())

	p, _ := openSim(t)
	pred, meas, err := p.SplitTable(8, 64)
	require.NoError(t, err)
	require.Equal(t, []SplitRow{{MinCount: 8, Groups: 15, GroupSMs: 8, Remainder: 12}, {MinCount: 64, Groups: 2, GroupSMs: 64, Remainder: 4}}, pred)
	require.Equal(t, pred, meas)
}

// NVMLFacts is the public copy of the NVML glue's facts: a field added there
// and not here would be dropped silently by Pool.NVML. Power is converted
// from milliwatts to watts (renamed) and the reason bits to ClockReasons.
func TestNVMLFactsHasEveryField(t *testing.T) {
	pub, in := reflect.TypeOf(NVMLFacts{}), reflect.TypeOf(nvml.Facts{})
	require.Equal(t, in.NumField(), pub.NumField())
	converted := map[string]reflect.Type{"PowerMW": reflect.TypeOf(0.0), "PowerLimitMW": reflect.TypeOf(0.0),
		"ClockReasons": reflect.TypeOf(ClockReasons(0))}
	renamed := map[string]string{"PowerMW": "PowerW", "PowerLimitMW": "PowerLimitW"}
	for i := range in.NumField() {
		name, typ := in.Field(i).Name, in.Field(i).Type
		if r, ok := renamed[name]; ok {
			name = r
		}
		if c, ok := converted[in.Field(i).Name]; ok {
			typ = c
		}
		f, ok := pub.FieldByName(name)
		require.True(t, ok, "NVMLFacts lacks %s", name)
		require.Equal(t, typ, f.Type, name)
	}
	// Every field set in the glue's facts comes out set.
	var src nvml.Facts
	v := reflect.ValueOf(&src).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.String:
			f.SetString("x")
		case reflect.Uint32, reflect.Uint64:
			f.SetUint(7)
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{"x"}))
		default:
			t.Fatalf("nvml.Facts.%s: kind %v not covered here", v.Type().Field(i).Name, f.Kind())
		}
	}
	out := reflect.ValueOf(nvmlFacts(src))
	for i := range out.NumField() {
		require.False(t, out.Field(i).IsZero(), "Pool.NVML drops %s", pub.Field(i).Name)
	}
}
