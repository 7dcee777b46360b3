package hamienv

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestParseMemory(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{"", 0}, {"0", 0}, {"0m", 0}, {"1", 1}, {"4096", 4096},
		{"1024k", 1 << 20}, {"1K", 1 << 10}, {"4096m", 4 << 30}, {"3M", 3 << 20},
		{"8g", 8 << 30}, {"80G", 80 << 30}, {"18446744073709551615", 1<<64 - 1},
		{"17179869183g", 17179869183 << 30},
	}
	for _, tt := range tests {
		got, err := ParseMemory(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestParseMemoryErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"4gb", "not a memory size"},
		{"g", "not a memory size"},
		{"-1", "not a memory size"},
		{" 8g", "not a memory size"},
		{"8g ", "not a memory size"},
		{"1.5g", "not a memory size"},
		{"0x10m", "not a memory size"},
		{"010m", "leading zero"},
		{"17179869184g", "overflows"},
		{"18446744073709551616", "overflows"},
		{"8t", "not a memory size"},
	}
	for _, tt := range tests {
		_, err := ParseMemory(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "allowed: ") {
			t.Errorf("ParseMemory(%q) error = %v; want one saying %q and what is allowed", tt.in, err, tt.want)
		}
	}
}

func TestParseSMLimit(t *testing.T) {
	for in, want := range map[string]int{"": 0, "0": 0, "30": 30, "100": 100, "250": 250, "99999999999999999999": 100} {
		got, err := ParseSMLimit(in)
		if err != nil || got != want {
			t.Errorf("ParseSMLimit(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"-5", "30%", "0.5", "abc", " 3"} {
		if _, err := ParseSMLimit(in); err == nil || !strings.Contains(err.Error(), "allowed: a whole percentage") {
			t.Errorf("ParseSMLimit(%q) error = %v", in, err)
		}
	}
}

func TestParse(t *testing.T) {
	c, err := Parse([]string{
		"PATH=/usr/bin",
		"CUDA_DEVICE_MEMORY_LIMIT=8g",
		"CUDA_DEVICE_MEMORY_LIMIT_1=4096m",
		"CUDA_DEVICE_MEMORY_LIMIT_2=0", // falls back to the global value
		"CUDA_DEVICE_SM_LIMIT=50",
		"CUDA_DEVICE_SM_LIMIT_1=25",
		"CUDA_DEVICE_SM_LIMIT_2=0", // lifts the global limit
		"CUDA_DEVICE_MEMORY_SHARED_CACHE=/dev/shm/x//y.cache",
		"CUDA_DEVICE_MEMORY_LIMIT=1g", // duplicate: first wins
		"NOEQUALS",
	})
	if err != nil {
		t.Fatal(err)
	}
	memTests := []struct {
		dev     int
		want    uint64
		limited bool
	}{{0, 8 << 30, true}, {1, 4 << 30, true}, {2, 8 << 30, true}, {7, 8 << 30, true}}
	for _, tt := range memTests {
		if got, lim := c.MemoryLimit(tt.dev); got != tt.want || lim != tt.limited {
			t.Errorf("MemoryLimit(%d) = %d, %v; want %d, %v", tt.dev, got, lim, tt.want, tt.limited)
		}
	}
	smTests := []struct {
		dev     int
		want    float64
		limited bool
	}{{0, 0.5, true}, {1, 0.25, true}, {2, 1, false}}
	for _, tt := range smTests {
		if got, lim := c.SMLimit(tt.dev); got != tt.want || lim != tt.limited {
			t.Errorf("SMLimit(%d) = %v, %v; want %v, %v", tt.dev, got, lim, tt.want, tt.limited)
		}
	}
	if c.SharedCache != "/dev/shm/x/y.cache" {
		t.Errorf("SharedCache = %q", c.SharedCache)
	}
}

func TestParseDefaults(t *testing.T) {
	c, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, lim := c.MemoryLimit(0); lim {
		t.Error("memory limited by default")
	}
	if _, lim := c.SMLimit(0); lim {
		t.Error("SM limited by default")
	}
	if c.SharedCache != DefaultSharedCache {
		t.Errorf("SharedCache = %q", c.SharedCache)
	}
	var zero Config
	if f, lim := zero.SMLimit(3); f != 1 || lim {
		t.Errorf("zero Config SMLimit = %v, %v", f, lim)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		env  string
		want []string
	}{
		{"CUDA_DEVICE_MEMORY_LIMIT=4gb", []string{"CUDA_DEVICE_MEMORY_LIMIT", `"4gb"`, "allowed"}},
		{"CUDA_DEVICE_MEMORY_LIMIT_0=-1", []string{"CUDA_DEVICE_MEMORY_LIMIT_0", `"-1"`, "allowed"}},
		{"CUDA_DEVICE_MEMORY_LIMIT_x=1g", []string{"CUDA_DEVICE_MEMORY_LIMIT_x", `device index "x"`}},
		{"CUDA_DEVICE_MEMORY_LIMIT_01=1g", []string{"leading zeros"}},
		{"CUDA_DEVICE_SM_LIMIT_5000=10", []string{"out of range", "0 to 1023"}},
		{"CUDA_DEVICE_SM_LIMIT=half", []string{"CUDA_DEVICE_SM_LIMIT", `"half"`, "whole percentage"}},
		{"CUDA_DEVICE_SM_LIMIT_1=-3", []string{"CUDA_DEVICE_SM_LIMIT_1", `"-3"`}},
		{"CUDA_DEVICE_MEMORY_SHARED_CACHE=rel/path", []string{"CUDA_DEVICE_MEMORY_SHARED_CACHE", "relative", "absolute"}},
		{"CUDA_DEVICE_MEMORY_SHARED_CACHE=/tmp/", []string{"directory"}},
	}
	for _, tt := range tests {
		_, err := Parse([]string{tt.env})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %v; want ErrInvalid", tt.env, err)
			continue
		}
		for _, s := range tt.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("Parse(%q) error %q does not mention %q", tt.env, err, s)
			}
		}
	}
	// All errors are reported, not just the first.
	_, err := Parse([]string{"CUDA_DEVICE_MEMORY_LIMIT=x", "CUDA_DEVICE_SM_LIMIT=y"})
	if err == nil || !strings.Contains(err.Error(), `"x"`) || !strings.Contains(err.Error(), `"y"`) {
		t.Errorf("joined errors: %v", err)
	}
}

func FuzzParseMemory(f *testing.F) {
	for _, s := range []string{"", "0", "4096m", "8g", "1024k", "12345", "4gb", "010m", "17179869184g"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseMemory(s)
		if err != nil {
			if v != 0 || !strings.Contains(err.Error(), "allowed") {
				t.Fatalf("ParseMemory(%q) = %d, %v", s, v, err)
			}
			return
		}
		// Accepted values round-trip through their byte count.
		if s != "" {
			back, err := ParseMemory(strconv.FormatUint(v, 10))
			if err != nil || back != v {
				t.Fatalf("ParseMemory(%q) = %d, but its byte form parses as %d, %v", s, v, back, err)
			}
		}
	})
}

func FuzzParseSMLimit(f *testing.F) {
	for _, s := range []string{"", "0", "30", "100", "101", "-1", "30%", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSMLimit(s)
		if err != nil {
			return
		}
		if v < 0 {
			t.Fatalf("ParseSMLimit(%q) = %d", s, v)
		}
		c := Config{SMLimitAll: v}
		frac, lim := c.SMLimit(0)
		if lim && (frac <= 0 || frac >= 1) || !lim && frac != 1 {
			t.Fatalf("SMLimit for %q = %v, %v", s, frac, lim)
		}
	})
}

func FuzzParseSharedCache(f *testing.F) {
	for _, s := range []string{"", "/tmp/cudevshr.cache", "rel", "/a/../b", "/x/", "/\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseSharedCache(s)
		if err != nil {
			return
		}
		if !strings.HasPrefix(p, "/") || strings.IndexByte(p, 0) >= 0 {
			t.Fatalf("ParseSharedCache(%q) = %q", s, p)
		}
	})
}

// FuzzParse feeds a newline-separated environment.
func FuzzParse(f *testing.F) {
	f.Add("CUDA_DEVICE_MEMORY_LIMIT=8g\nCUDA_DEVICE_MEMORY_LIMIT_1=4096m\nCUDA_DEVICE_SM_LIMIT=30")
	f.Add("CUDA_DEVICE_SM_LIMIT_0=0\nCUDA_DEVICE_MEMORY_SHARED_CACHE=/dev/shm/x")
	f.Add("CUDA_DEVICE_MEMORY_LIMIT_=1\nCUDA_DEVICE_MEMORY_LIMIT_9999=1g")
	f.Add("=\nCUDA_DEVICE_MEMORY_LIMIT\nCUDA_DEVICE_MEMORY_LIMIT==")
	f.Fuzz(func(t *testing.T, env string) {
		c, err := Parse(strings.Split(env, "\n"))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not match ErrInvalid", err)
			}
			return
		}
		for dev := range 4 {
			if b, lim := c.MemoryLimit(dev); lim != (b > 0) {
				t.Fatalf("MemoryLimit(%d) = %d, %v", dev, b, lim)
			}
			if fr, lim := c.SMLimit(dev); lim && (fr <= 0 || fr >= 1) {
				t.Fatalf("SMLimit(%d) = %v, %v", dev, fr, lim)
			}
		}
		if c.SharedCache == "" {
			t.Fatal("empty SharedCache")
		}
	})
}
