// Package bytesize says a byte count in a message: in the largest binary
// unit it reaches (KiB to EiB), and with the exact count beside it where
// the unit would round it, so that two counts a message compares never
// read the same while they differ ("16 GiB (17179869185 bytes)" beside
// "16 GiB"), and no count reads as a float's exponent.
package bytesize

import (
	"strconv"
)

var units = [...]string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// Format is n as a message says it: "1 byte", "512 bytes", "16 GiB",
// "140.4 GiB (150754820096 bytes)".
func Format(n uint64) string {
	switch {
	case n == 1:
		return "1 byte"
	case n < 1<<10:
		return strconv.FormatUint(n, 10) + " bytes"
	}
	i := 0
	for i+1 < len(units) && n>>(10*(i+2)) != 0 {
		i++
	}
	shift := 10 * (i + 1)
	if n&(1<<shift-1) == 0 {
		return strconv.FormatUint(n>>shift, 10) + " " + units[i]
	}
	v := float64(n) / float64(uint64(1)<<shift)
	return strconv.FormatFloat(v, 'g', 4, 64) + " " + units[i] + " (" + strconv.FormatUint(n, 10) + " bytes)"
}
