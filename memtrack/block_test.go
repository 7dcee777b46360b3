package memtrack

import (
	"math/rand/v2"
	"sync"
	"testing"
)

// Block finds the live allocation that holds a pointer, whoever's it is:
// at its start, inside it, at its last byte; not one byte past it, not
// after its release or its account's close, never for a pointer no
// allocation holds.
func TestBlockFindsTheAllocationHoldingAPointer(t *testing.T) {
	tr := mustTracker(t, 64*giB)
	a := mustAccount(t, tr, "a", 64*giB)
	b := mustAccount(t, tr, "b", 64*giB)
	commit := func(acct *Account, ptr, n uint64) {
		t.Helper()
		r, err := acct.Reserve(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Commit(ptr); err != nil {
			t.Fatal(err)
		}
	}
	// Blocks of many sizes, packed as a pool packs them (512-byte aligned,
	// back to back), and one far away of another account.
	sizes := []uint64{1, 511, 512, 4 * kiB, 4*kiB + 1, 3 * miB, 32 * miB, 1, 8 * kiB, 2 * giB}
	type blk struct{ ptr, n uint64 }
	var blocks []blk
	at := uint64(0x7f0000000000)
	for _, n := range sizes {
		commit(a, at, n)
		blocks = append(blocks, blk{at, n})
		at += (n + 511) &^ 511
	}
	commit(b, 0x10000, 100)
	blocks = append(blocks, blk{0x10000, 100})

	want := func(p uint64, w blk, ok bool) {
		t.Helper()
		got, found := tr.Block(p)
		if found != ok || ok && (got.Ptr != w.ptr || got.Size != w.n) {
			t.Fatalf("Block(%#x) = %+v, %v; want {%#x %d}, %v", p, got, found, w.ptr, w.n, ok)
		}
	}
	for _, w := range blocks {
		want(w.ptr, w, true)
		want(w.ptr+w.n/2, w, true)
		want(w.ptr+w.n-1, w, true)
		if w.n%512 != 0 { // the gap after it is no allocation's
			want(w.ptr+w.n, blk{}, false)
		}
	}
	want(0x7f0000000000-1, blk{}, false)
	want(0x10000+100, blk{}, false)
	want(0, blk{}, false)
	want(^uint64(0), blk{}, false)

	// Released: gone; an allocation at the same place is found as itself.
	if _, err := a.Release(blocks[5].ptr); err != nil {
		t.Fatal(err)
	}
	want(blocks[5].ptr+miB, blk{}, false)
	commit(a, blocks[5].ptr, miB)
	want(blocks[5].ptr+miB/2, blk{blocks[5].ptr, miB}, true)
	want(blocks[5].ptr+miB, blk{}, false)

	// A free under way is not found; one the driver refused is again.
	pr, err := a.StartRelease(blocks[3].ptr)
	if err != nil {
		t.Fatal(err)
	}
	want(blocks[3].ptr+1, blk{}, false)
	if err := pr.Cancel(); err != nil {
		t.Fatal(err)
	}
	want(blocks[3].ptr+1, blocks[3], true)

	// A closed account's blocks are gone; the other's stay.
	if _, err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for _, w := range blocks[:len(blocks)-1] {
		want(w.ptr+w.n-1, blk{}, false)
	}
	want(0x10000+99, blocks[len(blocks)-1], true)
}

// Block against a linear scan of the live records, with allocations and
// frees racing it (run under -race).
func TestBlockAgreesWithTheRecordsUnderChurn(t *testing.T) {
	tr := mustTracker(t, 1<<40)
	const workers = 4
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := mustAccount(t, tr, string(rune('a'+w)), 1<<40)
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			base := uint64(w+1) << 36 // each its own range, as each tenant's pool
			live := map[uint64]uint64{}
			for range 3000 {
				off := rng.Uint64N(1<<20) * 512
				if n, ok := live[off]; ok {
					p := base + off
					if got, found := tr.Block(p + rng.Uint64N(n)); !found || got.Ptr != p || got.Size != n {
						t.Errorf("Block inside {%#x %d}: %+v %v", p, n, got, found)
						return
					}
					if _, err := a.Release(p); err != nil {
						t.Error(err)
						return
					}
					delete(live, off)
					continue
				}
				n := uint64(1) << rng.UintN(24)
				n += rng.Uint64N(n)
				clash := false
				for o, m := range live {
					if off < o+m && o < off+n {
						clash = true
						break
					}
				}
				if clash {
					continue
				}
				r, err := a.Reserve(n)
				if err != nil {
					t.Error(err)
					return
				}
				if err := r.Commit(base + off); err != nil {
					t.Error(err)
					return
				}
				live[off] = n
			}
		}()
	}
	wg.Wait()
}

// BenchmarkBlock: the lookup a copy's check makes, at a block's start
// (one probe of the records), inside it, and for a pointer no block holds
// (every level in use probed), with 1,000 live blocks of mixed sizes.
func BenchmarkBlock(b *testing.B) {
	tr := mustTracker(b, 1<<50)
	a := mustAccount(b, tr, "a", 1<<50)
	at := uint64(0x7f0000000000)
	var inside uint64
	for i := range 1000 {
		n := uint64(512) << (i % 16)
		r, _ := a.Reserve(n)
		if err := r.Commit(at); err != nil {
			b.Fatal(err)
		}
		if i == 500 {
			inside = at + n - 1
		}
		at += n
	}
	for _, c := range []struct {
		name string
		p    uint64
	}{{"start", 0x7f0000000000}, {"inside", inside}, {"foreign", 0x1000}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				tr.Block(c.p)
			}
		})
	}
}
