package environ

import (
	"strings"
	"testing"
)

// FuzzEnv: any list and process environment (lines of "KEY=value") read
// by the two rules: Lookup agrees with a plain first-match search of the
// list, then of the process; Each visits each set variable once, with
// Lookup's value.
func FuzzEnv(f *testing.F) {
	f.Add("CUDA_DEVICE_MAX_CONNECTIONS=1\nCUDA_DEVICE_MAX_CONNECTIONS=32", "CUDA_DEVICE_MAX_CONNECTIONS=8", "CUDA_DEVICE_MAX_CONNECTIONS")
	f.Add("CUDA_DEVICE_MEMORY_LIMIT=4g", "CUDA_DEVICE_MAX_CONNECTIONS=1", "CUDA_DEVICE_MAX_CONNECTIONS")
	f.Add("=\n==\nA\nA=\nA==", "A=1", "A")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, list, process, key string) {
		l, p := strings.Split(list, "\n"), strings.Split(process, "\n")
		e := Of(l, p)
		v, ok := e.Lookup(key)
		wv, wok, wlist := naive(l, key), false, false
		if wv != nil {
			wok, wlist = true, true
		} else if wv = naive(p, key); wv != nil {
			wok = true
		}
		if ok != wok || ok && v != *wv || e.FromList(key) != wlist {
			t.Fatalf("Lookup(%q) = %q %v (list %v)", key, v, ok, e.FromList(key))
		}
		seen := map[string]bool{}
		e.Each(func(k, v string) {
			if seen[k] {
				t.Fatalf("Each: %q twice", k)
			}
			seen[k] = true
			if lv, lok := e.Lookup(k); !lok || lv != v {
				t.Fatalf("Each: %q=%q, Lookup %q %v", k, v, lv, lok)
			}
		})
		if ok != seen[key] {
			t.Fatalf("Each and Lookup disagree on %q", key)
		}
	})
}

// naive is the first value of key in vars, nil where none.
func naive(vars []string, key string) *string {
	for _, kv := range vars {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" && k == key {
			return &v
		}
	}
	return nil
}
