package main

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1 // 1..100 ms
	}
	thousand := make([]int, 1000)
	for i := range thousand {
		thousand[i] = i + 1
	}
	for _, c := range []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one sample", ms(7), 99.9, 7 * time.Millisecond},
		{"median of odd", ms(1, 2, 3), 50, 2 * time.Millisecond},
		{"median of even: lower middle", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p0 is the minimum", ms(1, 2, 3), 0, time.Millisecond},
		{"p100 is the maximum", ms(1, 2, 3), 100, 3 * time.Millisecond},
		{"p50 of 1..100", ms(hundred...), 50, 50 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p999 of 100 samples is the slowest", ms(hundred...), 99.9, 100 * time.Millisecond},
		{"p999 of 1..1000", ms(thousand...), 99.9, 999 * time.Millisecond},
		{"p99 of 1..1000", ms(thousand...), 99, 990 * time.Millisecond},
	} {
		if got := percentile(c.in, c.p); got != c.want {
			t.Errorf("%s: percentile(p%v) = %v, want %v", c.name, c.p, got, c.want)
		}
	}
}

func TestSummarizeSortsAndCounts(t *testing.T) {
	in := []time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond}
	l := summarize(in, 2, time.Second)
	if l.P50 != 2 || l.Max != 3 || l.OK != 3 || l.Errors != 2 || l.PerSec != 3 {
		t.Errorf("summarize = %+v", l)
	}
	if in[0] != 3*time.Millisecond {
		t.Error("summarize sorted its caller's slice")
	}
}

func TestCheckLoopback(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:8080", "localhost:1", "[::1]:8080"} {
		if err := checkLoopback(ok); err != nil {
			t.Errorf("checkLoopback(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"10.0.0.1:8080", "example.com:80", ":8080", "0.0.0.0:8080", "127.0.0.2:80",
		"[::]:80", "127.0.0.1", "localhost", "127.0.0.1:", "[::ffff:127.0.0.1]:80", "LOCALHOST.evil.com:80"} {
		if err := checkLoopback(bad); err == nil {
			t.Errorf("checkLoopback(%q) accepted", bad)
		}
	}
}

func TestOptionsRefuseRemoteAddr(t *testing.T) {
	if _, err := parseOptions([]string{"-addr", "192.168.1.5:8080"}, io.Discard); err == nil {
		t.Error("parseOptions accepted a non-loopback -addr")
	}
	o, err := parseOptions([]string{"-spawn", "./server", "-duration", "2s", "--", "-simulate"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.serverArgs, []string{"-simulate", "-batch-gpu-share", "0.9"}) || o.load.duration != 2*time.Second {
		t.Errorf("options %+v: want the server's arguments and the batch class's default GPU share", o)
	}
	o, err = parseOptions([]string{"-spawn", "./server", "--", "-batch-sm-limit=0.5"}, io.Discard)
	if err != nil || !slices.Equal(o.serverArgs, []string{"-batch-sm-limit=0.5"}) {
		t.Errorf("server arguments %q, %v: a limit given is kept, and no share added", o.serverArgs, err)
	}
	if _, err := spawn("./server", "shared", []string{"-addr", "0.0.0.0:80"}, nil); err == nil {
		t.Error("spawn let the server arguments pick the address")
	}
}

// The P99's confidence interval narrows with the sample count: from 1..100
// ms it is the top of the range (100 samples cannot place a P99), from
// 1..10000 a few ranks either side of 9900.
func TestQuantileCI(t *testing.T) {
	seq := func(n int) []time.Duration {
		d := make([]time.Duration, n)
		for i := range d {
			d[i] = time.Duration(i+1) * time.Millisecond
		}
		return d
	}
	lo, hi := quantileCI(seq(100), 99)
	if lo > 98*time.Millisecond || hi != 100*time.Millisecond {
		t.Errorf("100 samples: CI %v-%v, want down to at most 98 ms and up to the slowest (100 ms)", lo, hi)
	}
	lo, hi = quantileCI(seq(10000), 99)
	if lo < 9870*time.Millisecond || lo > 9890*time.Millisecond || hi < 9910*time.Millisecond || hi > 9930*time.Millisecond {
		t.Errorf("10000 samples: CI %v-%v, want about 9880-9920 ms", lo, hi)
	}
	if lo, hi := quantileCI(nil, 99); lo != 0 || hi != 0 {
		t.Error("empty")
	}
}

// Each mode row is divided by the alone row of its own round; the median
// and range follow.
func TestVsAlonePairsRounds(t *testing.T) {
	row := func(mode string, round int, p99 float64) Row {
		return Row{Mode: mode, Round: round, Interactive: Latency{OK: 1000, P99: p99}}
	}
	got := vsAlone([]Row{
		row("alone", 1, 0.276), row("partitioned", 1, 0.350), row("shared", 1, 5.0),
		row("alone", 2, 0.319), row("partitioned", 2, 0.346), row("shared", 2, 5.0),
		row("alone", 3, 0.306), row("partitioned", 3, 0.321), row("shared", 3, 5.0),
	})
	if len(got) != 2 || got[0].Mode != "partitioned" || got[1].Mode != "shared" {
		t.Fatalf("%+v", got)
	}
	p := got[0]
	want := []float64{0.350 / 0.276, 0.346 / 0.319, 0.321 / 0.306}
	for i := range want {
		if math.Abs(p.Ratios[i]-want[i]) > 1e-12 {
			t.Errorf("ratio %d = %v, want %v", i, p.Ratios[i], want[i])
		}
	}
	if math.Abs(p.Median-want[1]) > 1e-12 || math.Abs(p.Min-want[2]) > 1e-12 || math.Abs(p.Max-want[0]) > 1e-12 {
		t.Errorf("median %v min %v max %v", p.Median, p.Min, p.Max)
	}
	// A round without an alone row (it failed) is left out, not divided by
	// another round's.
	got = vsAlone([]Row{row("alone", 1, 0.3), row("partitioned", 1, 0.3), row("partitioned", 2, 9)})
	if len(got) != 1 || len(got[0].Ratios) != 1 || got[0].Median != 1 {
		t.Errorf("%+v", got)
	}
}

func TestOptionsRounds(t *testing.T) {
	for _, bad := range []string{"0", "-1", "101"} {
		if _, err := parseOptions([]string{"-spawn", "./server", "-rounds", bad}, io.Discard); err == nil {
			t.Errorf("-rounds %s accepted", bad)
		}
	}
}

// The warm-up runs the same load first and records none of it, out of no
// budget: the measured run still gets all of -max-requests.
func TestWarmupIsNotRecordedNorBudgeted(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1) }))
	defer srv.Close()
	l := load{duration: time.Second, maxRequests: 5, interactiveWorkers: 1, timeout: time.Second, warmup: 500 * time.Millisecond}
	d := newDriver(strings.TrimPrefix(srv.URL, "http://"), l)
	row, err := d.run(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	if row.Interactive.OK != 5 || served.Load() != 10 {
		t.Errorf("recorded %d, served %d; want 5 recorded of 10 served (5 in the warm-up)", row.Interactive.OK, served.Load())
	}
}
