//go:build linux && !cgo

package osthread

import "golang.org/x/sys/unix"

// Without cgo there is no thread-local storage to keep the id in.
func id() int { return unix.Gettid() }
