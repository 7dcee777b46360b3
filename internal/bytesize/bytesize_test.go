package bytesize

import (
	"math"
	"testing"
)

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want string
	}{
		{0, "0 bytes"},
		{1, "1 byte"},
		{1023, "1023 bytes"},
		{1 << 10, "1 KiB"},
		{1536, "1.5 KiB (1536 bytes)"},
		{16 << 30, "16 GiB"},
		{16<<30 + 1, "16 GiB (17179869185 bytes)"}, // rounding would hide the byte
		{150754820096, "140.4 GiB (150754820096 bytes)"},
		{1 << 62, "4 EiB"},
		{math.MaxUint64, "16 EiB (18446744073709551615 bytes)"}, // uint64(-1): no exponent
	} {
		if got := Format(c.n); got != c.want {
			t.Errorf("Format(%d) = %q; want %q", c.n, got, c.want)
		}
	}
}
