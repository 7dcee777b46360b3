package bytesize

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// FuzzFormat: every count reads back from what Format says of it. The
// exact form ("16 GiB", "512 bytes") is the count; the rounded form
// ("140.4 GiB (150754820096 bytes)") carries the count in bytes, and its
// figure is the count in the largest unit the count reaches, to 4 digits,
// never with an exponent.
func FuzzFormat(f *testing.F) {
	for _, n := range []uint64{0, 1, 2, 1023, 1024, 1025, 1536, 16 << 30, 16<<30 + 1, 150754820096, 1 << 62, math.MaxUint64, math.MaxUint64 - 1, 1<<60 - 1} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n uint64) {
		s := Format(n)
		if fig, _, _ := strings.Cut(s, " "); strings.ContainsAny(fig, "eE+") {
			t.Fatalf("Format(%d) = %q: an exponent", n, s)
		}
		if got, err := readBack(s); err != nil || got != n {
			t.Fatalf("Format(%d) = %q reads back as %d (%v)", n, s, got, err)
		}
	})
}

// readBack is Format's inverse, strict about the forms Format writes.
func readBack(s string) (uint64, error) {
	switch {
	case s == "1 byte":
		return 1, nil
	case strings.HasSuffix(s, " bytes)"): // "F UNIT (N bytes)"
		head, exact, _ := strings.Cut(strings.TrimSuffix(s, " bytes)"), " (")
		n, err := strconv.ParseUint(exact, 10, 64)
		if err != nil {
			return 0, err
		}
		fig, unit, _ := strings.Cut(head, " ")
		shift, err := unitShift(unit)
		if err != nil {
			return 0, err
		}
		v, err := strconv.ParseFloat(fig, 64)
		if err != nil {
			return 0, err
		}
		// The largest unit the count reaches, and the figure within
		// 4 digits' rounding of the count in it.
		if n>>shift == 0 || (shift < 60 && n>>(shift+10) != 0) || n&(1<<shift-1) == 0 {
			return 0, strconv.ErrRange
		}
		want := float64(n) / float64(uint64(1)<<shift)
		if math.Abs(v-want) > want*5e-4 {
			return 0, strconv.ErrRange
		}
		return n, nil
	case strings.HasSuffix(s, " bytes"):
		n, err := strconv.ParseUint(strings.TrimSuffix(s, " bytes"), 10, 64)
		if err == nil && (n == 1 || n >= 1<<10) {
			return 0, strconv.ErrRange
		}
		return n, err
	}
	fig, unit, _ := strings.Cut(s, " ")
	shift, err := unitShift(unit)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(fig, 10, 64)
	if err != nil || v == 0 || (shift < 60 && v >= 1<<10) {
		return 0, strconv.ErrRange
	}
	return v << shift, nil
}

func unitShift(unit string) (uint, error) {
	for i, u := range units {
		if u == unit {
			return uint(10 * (i + 1)), nil
		}
	}
	return 0, strconv.ErrSyntax
}
