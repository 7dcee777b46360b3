// Package environ is the one reader of the environment variables the SDK
// honours when a pool opens: CUDA_DEVICE_MAX_CONNECTIONS (internal/smpart's
// work queues), HAMi-core's limits (internal/hamienv), and what the caveats
// check looks at (CUDA_MPS_*, LD_PRELOAD). Every reader asks an Env, so
// that two rules hold for all of them:
//
//   - A variable set twice: the first setting wins, as getenv(3) and
//     os.Getenv read the process's environment.
//   - A list given to the pool (fcsp.WithEnviron) overlays the process's
//     environment: a variable the list sets is read from the list, any
//     other from the process, as if the list had been exported into the
//     process before the pool opened.
//
// An entry without '=', or with an empty name, sets nothing. FCSP_LIBCUDA
// is not read here: internal/cuda reads it from the process once, when it
// loads the driver for the whole process, before any pool's options.
package environ

import (
	"os"
	"strings"
)

// Env is a list laid over a process's environment, both in os.Environ's
// "KEY=value" form. The zero Env sets nothing.
type Env struct {
	list, process []string
}

// Of is list laid over process.
func Of(list, process []string) Env { return Env{list: list, process: process} }

// Over is list laid over this process's environment as it is now.
func Over(list []string) Env { return Of(list, os.Environ()) }

// Lookup is key's value: its first setting in the list, else its first in
// the process's environment; ok is false where neither sets it.
func (e Env) Lookup(key string) (value string, ok bool) {
	value, ok, _ = e.lookup(key)
	return value, ok
}

// FromList reports whether key's value (Lookup) comes from the list.
func (e Env) FromList(key string) bool {
	_, ok, inList := e.lookup(key)
	return ok && inList
}

func (e Env) lookup(key string) (value string, ok, inList bool) {
	if key == "" || strings.IndexByte(key, '=') >= 0 {
		return "", false, false // no variable has such a name
	}
	if v, ok := first(e.list, key); ok {
		return v, true, true
	}
	v, ok := first(e.process, key)
	return v, ok, false
}

func first(vars []string, key string) (string, bool) {
	for _, kv := range vars {
		if len(kv) > len(key) && kv[len(key)] == '=' && kv[:len(key)] == key {
			return kv[len(key)+1:], true
		}
	}
	return "", false
}

// Each calls f once for each variable set, with the value Lookup gives,
// the list's variables first, each in the order first seen.
func (e Env) Each(f func(key, value string)) {
	seen := make(map[string]bool)
	for _, vars := range [2][]string{e.list, e.process} {
		for _, kv := range vars {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || seen[k] {
				continue
			}
			seen[k] = true
			f(k, v)
		}
	}
}
