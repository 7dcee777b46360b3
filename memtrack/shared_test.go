package memtrack

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/shm"
)

const (
	childEnv   = "MEMTRACK_SHARED_CHILD" // region path; marks the child process
	sharedLim  = 1 << 30                 // device limit used by both processes
	childHold  = 256 * miB               // what the child holds before its storm
	parentHold = 100 * miB
)

var regionLayout = shm.Layout{Devices: 1, Slots: 16}

// TestSharedChild is the child half of TestSharedCrashRecovery. It joins
// the region, reserves childHold, tells the parent, then allocates and
// frees in a storm until it is killed.
func TestSharedChild(t *testing.T) {
	path := os.Getenv(childEnv)
	if path == "" {
		t.Skip("helper process for TestSharedCrashRecovery")
	}
	r, err := shm.Open(path, regionLayout, nil)
	if err != nil {
		t.Fatal(err)
	}
	slot, err := r.Join(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	slot.StartHeartbeat(200*time.Millisecond, func() { os.Exit(3) })
	tr, err := New(sharedLim, WithShared(mustShare(t, slot, 0)))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := tr.NewAccount("child", sharedLim)
	if err := a.reserve(childHold); err != nil {
		t.Fatal(err)
	}
	fmt.Println("READY")
	rng := rand.New(rand.NewPCG(1, 2))
	var ptrs []uint64
	for i := uint64(1); ; i++ {
		n := 1 + rng.Uint64N(8*miB)
		if a.reserve(n) == nil {
			_ = a.record(i<<12, n)
			ptrs = append(ptrs, i<<12)
		}
		if len(ptrs) > 32 || (len(ptrs) > 0 && rng.IntN(2) == 0) {
			j := rng.IntN(len(ptrs))
			_, _ = a.Release(ptrs[j])
			ptrs[j] = ptrs[len(ptrs)-1]
			ptrs = ptrs[:len(ptrs)-1]
		}
	}
}

// TestSharedCrashRecovery re-executes the test binary as a child that joins
// a shared region and allocates in a storm. The parent checks that the
// child's reservations count against its own device limit, SIGKILLs the
// child mid-storm, and waits for its reaper to bring the device total back
// to exactly the parent's own usage.
func TestSharedCrashRecovery(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in child")
	}
	path := filepath.Join(t.TempDir(), "region")
	r, err := shm.Open(path, regionLayout, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	slot, err := r.Join(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer slot.StartHeartbeat(200*time.Millisecond, nil)()
	tr, err := New(sharedLim, WithShared(mustShare(t, slot, 0)))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := tr.NewAccount("parent", sharedLim)
	if err := a.reserve(parentHold); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestSharedChild$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	for sc.Scan() && !strings.Contains(sc.Text(), "READY") {
	}
	go func() {
		for sc.Scan() { // drain so the child never blocks on stdout
		}
	}()

	// The child's reservation is visible to our device-limit check: with
	// 100 MiB ours and >= 256 MiB the child's, 700 MiB cannot fit in 1 GiB.
	var qe *QuotaError
	if err := a.reserve(700 * miB); !errors.As(err, &qe) || qe.Scope != ScopeDevice || qe.Used < parentHold+childHold {
		t.Fatalf("Reserve past the shared device limit: %v", err)
	}
	// Let the storm run, then kill it mid-flight.
	deadline := time.Now().Add(10 * time.Second)
	for stormed := 0; stormed < 3; {
		if tr.Used() != parentHold+childHold {
			stormed++ // observed the child's storm moving the total
		}
		if time.Now().After(deadline) {
			t.Fatal("child storm never observed")
		}
		time.Sleep(time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if u := tr.Used(); u <= parentHold {
		t.Fatalf("device total %d right after the kill; the child's usage should still be counted", u)
	}

	stop := r.StartReaper(100*time.Millisecond, time.Second, nil)
	defer stop()
	for deadline := time.Now().Add(5 * time.Second); tr.Used() != a.Used(); {
		if time.Now().After(deadline) {
			t.Fatalf("device total %d, want the parent's own %d; slots: %+v", tr.Used(), a.Used(), r.Slots())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if tr.Used() != parentHold {
		t.Fatalf("device total %d, want %d", tr.Used(), parentHold)
	}
	// And the room is usable again.
	if err := a.reserve(700 * miB); err != nil {
		t.Fatal(err)
	}
}

// TestSharedStorm has two trackers on two slots of one region, standing in
// for two processes, allocate concurrently against one shared device limit.
// An independent sum of reservations held at once must never pass it.
func TestSharedStorm(t *testing.T) {
	r, err := shm.Open(filepath.Join(t.TempDir(), "region"), regionLayout, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const limit = 32 * miB
	var held atomic.Int64
	var wg sync.WaitGroup
	var trackers []*Tracker
	for p := 0; p < 2; p++ {
		slot, err := r.Join(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		tr, err := New(limit, WithShared(mustShare(t, slot, 0)))
		if err != nil {
			t.Fatal(err)
		}
		trackers = append(trackers, tr)
		a, _ := tr.NewAccount("t", limit)
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(seed uint64) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, 9))
				var mine []uint64
				for i := 0; i < 5000; i++ {
					if len(mine) > 0 && rng.IntN(2) == 0 {
						n := mine[len(mine)-1]
						mine = mine[:len(mine)-1]
						held.Add(-int64(n))
						a.unreserve(n)
						continue
					}
					n := 1 + rng.Uint64N(2*miB)
					if a.reserve(n) != nil {
						continue
					}
					if h := held.Add(int64(n)); h > limit {
						t.Errorf("held %d > shared limit %d", h, limit)
					}
					mine = append(mine, n)
				}
				for _, n := range mine {
					held.Add(-int64(n))
					a.unreserve(n)
				}
			}(uint64(p*10 + g))
		}
	}
	wg.Wait()
	for _, tr := range trackers {
		if tr.Used() != 0 {
			t.Fatalf("shared total %d after storm", tr.Used())
		}
	}
}

func mustShare(t testing.TB, slot *shm.Slot, dev int) *shm.DeviceShare {
	t.Helper()
	d, err := slot.Device(dev)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestWithSharedNil(t *testing.T) {
	if _, err := New(miB, WithShared(nil)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("WithShared(nil): %v", err)
	}
}
