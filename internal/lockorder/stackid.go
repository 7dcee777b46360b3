package lockorder

import (
	"bytes"
	"runtime"
)

// stackID is the calling goroutine's id, read from its stack's header
// ("goroutine 12 [running]:"): goid where no register names the goroutine.
func stackID() uintptr {
	var b [64]byte
	s := bytes.TrimPrefix(b[:runtime.Stack(b[:], false)], []byte("goroutine "))
	var id uintptr
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uintptr(c-'0')
	}
	return id
}
