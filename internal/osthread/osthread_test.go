//go:build linux

package osthread

import (
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// The cached id is the kernel's, on every thread, the first call and
// later ones alike, and two threads never share one.
func TestIDIsGettid(t *testing.T) {
	const threads = 8
	ids := make([]int, threads)
	var wg sync.WaitGroup
	var stop sync.WaitGroup // keep every thread locked until all have looked
	stop.Add(1)
	for i := range threads {
		wg.Add(1)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for range 3 {
				if got, want := ID(), unix.Gettid(); got != want {
					t.Errorf("ID() = %d on thread %d", got, want)
				}
			}
			ids[i] = ID()
			wg.Done()
			stop.Wait()
		}()
	}
	wg.Wait()
	stop.Done()
	seen := map[int]bool{}
	for _, id := range ids {
		if id <= 0 || seen[id] {
			t.Fatalf("thread ids %v: want distinct positive ids", ids)
		}
		seen[id] = true
	}
}

func BenchmarkID(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for b.Loop() {
		ID()
	}
}

// BenchmarkGettid is the system call ID replaces, the same run's baseline.
func BenchmarkGettid(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for b.Loop() {
		unix.Gettid()
	}
}
