package devmem

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

func TestSizeClass(t *testing.T) {
	for _, tc := range []struct {
		n     uint64
		class int
		size  uint64
	}{
		{1, 0, 512},
		{512, 0, 512},
		{513, 1, 576},
		{1024, 8, 1024},
		{1025, 9, 1152},
		{1 << 20, 88, 1 << 20},
		{1<<20 + 1, 89, 1<<20 + 1<<17},
		{3 << 20, 100, 3 << 20},
		{maxCachedSize, numClasses - 1, maxCachedSize},
	} {
		class, size, ok := sizeClass(tc.n)
		require.True(t, ok, "n=%d", tc.n)
		require.Equal(t, tc.class, class, "class of %d", tc.n)
		require.Equal(t, tc.size, size, "size of %d", tc.n)
	}
	_, size, ok := sizeClass(maxCachedSize + 1)
	require.False(t, ok, "larger blocks go straight to the driver's pool")
	require.Equal(t, uint64(maxCachedSize+1), size)
}

// TestSizeClassProperties: every request fits its class's blocks, at most
// 1/8 larger (512 B at least), classes grow with the request, and
// classSize inverts sizeClass.
func TestSizeClassProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	// Plain comparisons, not require: 165536 checks, and require's
	// formatting made this the slowest test under -race.
	check := func(n uint64) {
		class, size, ok := sizeClass(n)
		if !ok || size < n || size > max(512, n+n/8) || size != classSize(class) {
			t.Fatalf("n=%d: class %d size %d ok %v (classSize %d)", n, class, size, ok, classSize(class))
		}
		if n > 1 {
			if prev, _, _ := sizeClass(n - 1); prev > class {
				t.Fatalf("n=%d: class %d below n-1's %d", n, class, prev)
			}
		}
	}
	for n := uint64(1); n < 1<<16; n++ {
		check(n)
	}
	for range 100000 {
		check(1 + r.Uint64N(maxCachedSize))
	}
	for class := range numClasses {
		c, size, _ := sizeClass(classSize(class))
		require.Equal(t, class, c)
		require.Equal(t, classSize(class), size)
	}
}

// TestFreeListShards: blocks put from many goroutines all come back out,
// once each, whichever shards they landed on.
func TestFreeListShards(t *testing.T) {
	var l freeList
	const per, g = 500, 8
	var wg sync.WaitGroup
	for w := range g {
		wg.Go(func() {
			for i := range per {
				if !l.put(3, cuda.DevicePtr(uint64(w*per+i+1)<<12), math.MaxUint64) {
					panic("refused with no bound")
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, uint64(per*g)*classSize(3), l.bytes())
	got := make(chan cuda.DevicePtr, per*g)
	for range g {
		wg.Go(func() {
			for {
				p, ok := l.take(3)
				if !ok {
					return
				}
				got <- p
			}
		})
	}
	wg.Wait()
	close(got)
	seen := map[cuda.DevicePtr]bool{}
	for p := range got {
		require.False(t, seen[p], "%#x taken twice", uint64(p))
		seen[p] = true
	}
	require.Len(t, seen, per*g)
	require.Zero(t, l.bytes())
	_, ok := l.take(3)
	require.False(t, ok)
	_, ok = l.take(4)
	require.False(t, ok, "another class is empty")
}

// TestFreeListBoundUnderRaces: puts racing from many goroutines never leave
// the list over its bound, and what it counts is what it holds.
func TestFreeListBoundUnderRaces(t *testing.T) {
	const class, g, per = 20, 16, 200
	size := classSize(class)
	keep := 37 * size
	var l freeList
	var kept atomic.Int64
	var wg sync.WaitGroup
	for w := range g {
		wg.Go(func() {
			for i := range per {
				if l.put(class, cuda.DevicePtr(uint64(w*per+i+1)<<12), keep) {
					kept.Add(1)
				}
				if i%3 == 0 {
					if _, ok := l.take(class); ok {
						kept.Add(-1)
					}
				}
			}
		})
	}
	wg.Wait()
	require.LessOrEqual(t, l.bytes(), keep)
	require.Equal(t, uint64(kept.Load())*size, l.bytes())
	ptrs, freed := l.drain()
	require.Len(t, ptrs, int(kept.Load()))
	require.Equal(t, uint64(kept.Load())*size, freed)
	require.Zero(t, l.bytes())
}

// put is room, then push: false where the list has no room.
func (l *freeList) put(class int, p cuda.DevicePtr, keep uint64) bool {
	counted := l.room(class, keep)
	if counted == nil {
		return false
	}
	l.push(counted, class, p)
	return true
}
