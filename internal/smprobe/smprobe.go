// Package smprobe is the kernel that says where a context's work runs:
// each block of smid records the SM it ran on (%smid). A pool runs it on
// its tenants' streams (Run, for fcsp.Pool.ProbeSMs) to check that no
// tenant's work lands on another's partition, the way the H200
// measurements of docs/CONTEXTS.md were made. The fake driver models it by
// name (fake.SMIDKernel).
//
// # Lock order
//
// This package's slice of docs/LOCKS.md, each lock's level there in
// parentheses (a lock is taken only under those above it):
//
//	smprobe Kernel.mu (3)           the probe's module and function, loaded once; held across their load and unload
//	  memtrack Tracker.mu (15)      at most: the module's charge against the device limit (the pool's guard, internal/overhead)
//
// Its callers (fcsp's Pool.ProbeSMs, and Pool.Close once its tenants have
// closed) hold no lock when they take it. Under it are the load's and the
// unload's driver calls, made through the pool's guard, which charges the
// module's cost as an allocation's is charged (Tracker.mu at most) and
// notes it by handle (internal/overhead's Meter.mu, a leaf outside the
// ranks).
package smprobe

import (
	"encoding/binary"
	"slices"
)

// Name is the kernel's entry point.
const Name = "smid"

// PTX is smid(u32 *out, u64 cycles): each block waits cycles SM clocks, so
// that a grid spreads over every SM its context may use rather than
// landing on the first free ones, then its thread 0 writes the block's
// %smid at out[blockIdx.x].
var PTX = []byte(`
.version 7.0
.target sm_70
.address_size 64

.visible .entry smid(
	.param .u64 smid_out,
	.param .u64 smid_cycles
)
{
	.reg .pred %p<3>;
	.reg .b32 %r<4>;
	.reg .b64 %rd<9>;

	ld.param.u64 %rd1, [smid_out];
	ld.param.u64 %rd2, [smid_cycles];
	mov.u64 %rd3, %clock64;
$Lwait:
	mov.u64 %rd4, %clock64;
	sub.s64 %rd5, %rd4, %rd3;
	setp.lt.s64 %p1, %rd5, %rd2;
	@%p1 bra $Lwait;
	mov.u32 %r1, %tid.x;
	setp.ne.u32 %p2, %r1, 0;
	@%p2 bra $Ldone;
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %smid;
	cvta.to.global.u64 %rd6, %rd1;
	mul.wide.u32 %rd7, %r2, 4;
	add.s64 %rd8, %rd6, %rd7;
	st.global.u32 [%rd8], %r3;
$Ldone:
	ret;
}
`)

// Cycles is how long each block waits: about a microsecond on the H200,
// too short to matter to a neighbour, long enough for the grid to spread.
const Cycles = 2000

// Blocks is the grid for a device of sms SMs: four blocks per SM, more
// than any context can hold at once, so every SM it may use gets some.
func Blocks(sms int) int { return 4 * max(sms, 1) }

// Unwritten fills the output first: no SM has this id, so a block that
// did not run is not taken for SM 0.
const Unwritten = 0xffffffff

// SMs decodes the output (one little-endian u32 per block) into the SMs
// the blocks ran on, ascending, each once.
func SMs(out []byte) []int {
	var ids []int
	for i := 0; i+4 <= len(out); i += 4 {
		if v := binary.LittleEndian.Uint32(out[i:]); v != Unwritten {
			ids = append(ids, int(v))
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// Overlap lists the SMs in both a and b (each ascending).
func Overlap(a, b []int) []int {
	var out []int
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); ok {
			out = append(out, x)
		}
	}
	return out
}
