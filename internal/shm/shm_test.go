package shm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var testLayout = Layout{Devices: 2, Slots: 8}

func openT(t *testing.T, path string, l Layout) *Region {
	t.Helper()
	r, err := Open(path, l, &Options{OpenTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestCreateAndShare(t *testing.T) {
	path := filepath.Join(t.TempDir(), "region")
	a := openT(t, path, testLayout)
	b := openT(t, path, testLayout)
	if !a.Created() || b.Created() {
		t.Fatalf("Created: a=%v b=%v", a.Created(), b.Created())
	}
	if a.MlockErr != nil {
		t.Logf("mlock not available: %v", a.MlockErr)
	}
	st, _ := os.Stat(path)
	if st.Size()%pageSize != 0 || uint64(st.Size()) != testLayout.geometry().size {
		t.Errorf("region size %d not page aligned / not %d", st.Size(), testLayout.geometry().size)
	}
	s, err := a.Join(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	s.Usage(1).Add(42)
	if got := b.DeviceUsed(1); got != 42 {
		t.Errorf("second mapping sees %d, want 42", got)
	}
	if b.DeviceUsed(0) != 0 {
		t.Error("device 0 changed")
	}
}

func TestLayoutIsPadded(t *testing.T) {
	g := Layout{Devices: 3, Slots: 5}.geometry()
	for _, off := range []uint64{g.beatOff, g.slotOff, g.size} {
		if off%pageSize != 0 {
			t.Errorf("section offset %d not 4 KiB aligned", off)
		}
	}
	if g.slotStride%lineSize != 0 {
		t.Errorf("slot stride %d not a multiple of %d", g.slotStride, lineSize)
	}
}

func TestBadRegion(t *testing.T) {
	good := testLayout.geometry()
	header := func(mut func(h []uint64)) []byte {
		h := []uint64{Magic, Version, good.size, uint64(testLayout.Devices), uint64(testLayout.Slots),
			good.beatOff, good.slotOff, good.slotStride}
		mut(h)
		b := make([]byte, good.size)
		for i, v := range h {
			for j := 0; j < 8; j++ {
				b[i*8+j] = byte(v >> (8 * j))
			}
		}
		return b
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"bad magic", header(func(h []uint64) { h[0] = 0xdeadbeef }), "magic 0xdeadbeef"},
		{"bad version", header(func(h []uint64) { h[1] = 99 }), "version 99"},
		{"version 2", header(func(h []uint64) { h[1] = 2 }), "version 2, this build reads version 3"},
		{"size mismatch", header(func(h []uint64) { h[2] = 1 << 40 }), "header says 1099511627776 bytes"},
		{"truncated file", header(func([]uint64) {})[:pageSize], "file has 4096"},
		{"other layout", header(func(h []uint64) { h[3] = 7 }), "7 devices"},
		{"bad offsets", header(func(h []uint64) { h[6] = 12 }), "section offsets"},
		{"never published", header(func(h []uint64) { h[0] = 0 }), "magic not published"},
		{"empty file", nil, "magic not published"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "region")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := Open(path, testLayout, &Options{OpenTimeout: 20 * time.Millisecond})
			if err == nil {
				r.Close()
				t.Fatal("Open accepted a bad region")
			}
			if !errors.Is(err, ErrBadRegion) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrBadRegion mentioning %q", err, tt.want)
			}
		})
	}
}

func TestBadLayout(t *testing.T) {
	for _, l := range []Layout{{0, 1}, {1, 0}, {MaxDevices + 1, 1}, {1, MaxSlots + 1}} {
		if _, err := Open(filepath.Join(t.TempDir(), "r"), l, nil); err == nil || !strings.Contains(err.Error(), "allowed") {
			t.Errorf("layout %+v: got %v", l, err)
		}
	}
}

// TestCreateRace opens one path from many goroutines at once, each with its
// own file descriptor and mapping, as separate processes would.
func TestCreateRace(t *testing.T) {
	for round := 0; round < 20; round++ {
		path := filepath.Join(t.TempDir(), fmt.Sprint("region", round))
		const n = 8
		regions := make([]*Region, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range regions {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				regions[i], errs[i] = Open(path, testLayout, nil)
			}(i)
		}
		wg.Wait()
		created := 0
		for i, r := range regions {
			if errs[i] != nil {
				t.Fatalf("round %d: %v", round, errs[i])
			}
			if r.Created() {
				created++
			}
			s, err := r.Join(os.Getpid())
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			s.Usage(0).Add(1)
		}
		if created != 1 {
			t.Fatalf("round %d: %d creators", round, created)
		}
		for _, r := range regions {
			if got := r.DeviceUsed(0); got != n {
				t.Fatalf("round %d: device total %d, want %d", round, got, n)
			}
			r.Close()
		}
	}
}

func TestJoinLeave(t *testing.T) {
	r := openT(t, filepath.Join(t.TempDir(), "region"), Layout{Devices: 2, Slots: 2})
	s1, err := r.Join(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := r.Join(os.Getpid())
	if _, err := r.Join(os.Getpid()); !errors.Is(err, ErrNoSlot) {
		t.Fatalf("third Join: %v", err)
	}
	s1.Usage(1).Add(60)
	s2.Usage(1).Add(40)
	if !s1.Leave() || s1.Owned() || s1.Leave() {
		t.Fatal("Leave")
	}
	if got := r.DeviceUsed(1); got != 40 {
		t.Fatalf("device total %d after Leave, want 40", got)
	}
	if _, err := r.Join(os.Getpid()); err != nil {
		t.Fatalf("Join after Leave: %v", err)
	}
}

// deadPID returns the pid of a process that has exited and been waited for.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestReapRace has many reapers race on one dead slot: exactly one must
// clean it, and the device totals must drop by exactly its usage.
func TestReapRace(t *testing.T) {
	r := openT(t, filepath.Join(t.TempDir(), "region"), testLayout)
	pid := deadPID(t)
	for round := 0; round < 200; round++ {
		mine, _ := r.Join(os.Getpid())
		dead, err := r.Join(pid)
		if err != nil {
			t.Fatal(err)
		}
		for d, n := range []uint64{1000, 7} {
			dead.Usage(d).Add(n)
			mine.Usage(d).Add(5)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		cleaned := 0
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := len(r.Reap(time.Hour)) // only death, never timeout
				mu.Lock()
				cleaned += n
				mu.Unlock()
			}()
		}
		wg.Wait()
		if cleaned != 1 {
			t.Fatalf("round %d: %d reapers cleaned the slot", round, cleaned)
		}
		for d := 0; d < 2; d++ {
			if got := r.DeviceUsed(d); got != 5 {
				t.Fatalf("round %d: device %d total %d, want 5", round, d, got)
			}
		}
		if !mine.Leave() {
			t.Fatal("own slot was reaped")
		}
	}
}

func TestReapStaleHeartbeat(t *testing.T) {
	r := openT(t, filepath.Join(t.TempDir(), "region"), testLayout)
	// A live process (our parent) that stopped beating.
	s, _ := r.Join(os.Getppid())
	s.Usage(0).Add(10)
	if got := r.Reap(time.Hour); len(got) != 0 {
		t.Fatalf("fresh slot reaped: %v", got)
	}
	r.beatWord(s.Index()).Store(monotonicNow() - uint64(2*time.Second))
	if got := r.Reap(time.Second); len(got) != 1 || r.DeviceUsed(0) != 0 {
		t.Fatalf("stale slot not reaped: %v, total %d", got, r.DeviceUsed(0))
	}
	if s.Beat() {
		t.Error("Beat succeeded on a reaped slot")
	}
}

func TestHeartbeatAndReaperLoops(t *testing.T) {
	r := openT(t, filepath.Join(t.TempDir(), "region"), testLayout)
	s, _ := r.Join(os.Getppid())
	lost := make(chan struct{})
	stopBeat := s.StartHeartbeat(10*time.Millisecond, func() { close(lost) })
	before := r.beatWord(s.Index()).Load()
	deadline := time.Now().Add(5 * time.Second)
	for r.beatWord(s.Index()).Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("heartbeat never advanced")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Simulate a stall: stop beating, let the reaper take the slot.
	stopBeat()
	reaped := make(chan []int, 10)
	stop := r.StartReaper(10*time.Millisecond, 50*time.Millisecond, func(s []int) { reaped <- s })
	defer stop()
	select {
	case got := <-reaped:
		if len(got) != 1 || got[0] != s.Index() {
			t.Fatalf("reaped %v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reaper never reaped the stale slot")
	}
	// A heartbeat that restarts finds the slot lost.
	stopBeat = s.StartHeartbeat(5*time.Millisecond, func() { close(lost) })
	defer stopBeat()
	select {
	case <-lost:
	case <-time.After(5 * time.Second):
		t.Fatal("onLost not called")
	}
}
