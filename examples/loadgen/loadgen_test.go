package main

import (
	"io"
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
	if len(o.serverArgs) != 1 || o.serverArgs[0] != "-simulate" || o.load.duration != 2*time.Second {
		t.Errorf("options %+v", o)
	}
	if _, err := spawn("./server", "shared", []string{"-addr", "0.0.0.0:80"}, nil); err == nil {
		t.Error("spawn let the server arguments pick the address")
	}
}
