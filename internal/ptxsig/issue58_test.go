package ptxsig

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// Issue 58 #1: a // comment inside a parameter list is not part of it, and
// a commented-out parameter is not counted.
func TestCommentInParams(t *testing.T) {
	sigs, _, err := Parse([]byte(head + ".visible .entry k(.param .u64 a // out (float*)\n, .param .u32 n)\n{ ret; }\n"))
	if got := sigs["k"].String(); err != nil || got != "(.u64, .u32)" {
		t.Errorf("k: %s (%v), want (.u64, .u32)", got, err)
	}
	sigs, _, err = Parse([]byte(head + ".visible .entry k(.param .u64 a, // .param .u32 old,\n .param .u32 n /* , .param .u32 older */)\n{ ret; }\n"))
	if got := sigs["k"].String(); err != nil || got != "(.u64, .u32)" {
		t.Errorf("k with a commented-out parameter: %s (%v), want (.u64, .u32)", got, err)
	}
}

// Issue 58 #2: an array parameter's size does not wrap: it is refused.
func TestArrayOverflow(t *testing.T) {
	sigs, _, err := Parse([]byte(head + ".visible .entry k(.param .u64 a[1152921504606846976], .param .u32 n)\n{ ret; }\n"))
	if s, ok := sigs["k"]; ok || !errors.Is(err, errs.ErrInvalidArgument) {
		t.Errorf("k read as %v (%v): a wrapped size", s, err)
	}
}

// Issue 58 #3: reading is linear: 16 times the text takes about 16 times
// as long, not 256.
func TestLinear(t *testing.T) {
	read := func(size int) time.Duration {
		img := hostile(size)
		best := time.Duration(1 << 62)
		for range 3 {
			start := time.Now()
			if _, _, err := Parse(img); err != nil {
				t.Fatal(err)
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	small, large := read(64<<10), read(1<<20)
	if large > 64*small {
		t.Errorf("64 KiB in %v, 1 MiB in %v: %.0fx for 16x the text", small, large, float64(large)/float64(small))
	}
}

// hostile is a PTX image of size bytes that the simulator accepts, with
// .entry repeated inside a comment.
func hostile(size int) []byte {
	var b bytes.Buffer
	b.WriteString(head + "/*")
	for b.Len() < size-16 {
		b.WriteString(" .entry")
	}
	b.WriteString(" */\n")
	return b.Bytes()
}
