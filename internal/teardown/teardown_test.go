package teardown

import (
	"errors"
	"strings"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/devmem"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/event"
	"github.com/fcsp-go/fcsp-go/internal/hostwait"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

func parts(t *testing.T) (*fake.Driver, Pool) {
	t.Helper()
	drv := fake.New(fake.H200())
	dev, err := smpart.Open(drv, 0)
	if err != nil {
		t.Fatal(err)
	}
	split, err := dev.Split(8)
	if err != nil {
		t.Fatal(err)
	}
	spare := smpart.NewSpares([]int{16})
	part, err := split.Take(16)
	if err != nil {
		t.Fatal(err)
	}
	spare.Add(part)
	mem, err := memtrack.New(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	blk := hostwait.NewBlocker(drv, dev.Primary())
	return drv, Pool{Drv: drv, Dev: dev, Spare: spare, Events: &event.Set{}, Peers: &devmem.Peers{}, Blocker: blk, Mem: mem}
}

// Everything a pool made is let go of: the spare partitions' green
// contexts and streams, and the device's primary context.
func TestCloseLetsGoOfEverything(t *testing.T) {
	drv, p := parts(t)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	live := drv.Live()
	if live.GreenCtxs != 0 || live.Streams != 0 || live.PrimaryRefs != 0 {
		t.Fatalf("left behind: %+v", live)
	}
	if _, err := p.Mem.NewAccount("late", 1); !errors.Is(err, errs.ErrClosed) {
		t.Fatalf("the tracker is not closed: %v", err)
	}
}

// What the tenants left counted is reported, and the rest is still closed.
func TestCloseReportsWhatIsStillCounted(t *testing.T) {
	drv, p := parts(t)
	a, err := p.Mem.NewAccount("a", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Reserve(4096); err != nil {
		t.Fatal(err)
	}
	err = p.Close()
	if err == nil || !strings.Contains(err.Error(), "bytes still counted after every tenant closed") {
		t.Fatalf("Close = %v; want the leak reported", err)
	}
	if live := drv.Live(); live.PrimaryRefs != 0 {
		t.Fatalf("the device was not closed after the leak: %+v", live)
	}
}

// A pool whose Open failed before the device (or the tracker) was made
// closes what there is.
func TestCloseOfAPartialPool(t *testing.T) {
	if err := (Pool{Spare: smpart.NewSpares(nil), Events: &event.Set{}, Peers: &devmem.Peers{}}).Close(); err != nil {
		t.Fatal(err)
	}
}
