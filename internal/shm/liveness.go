package shm

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// identity is what a member records about itself for reapers in other
// processes: its PID namespace and its start time.
type identity struct {
	ns    uint64 // inode of the PID namespace; 0 unknown
	start uint64 // start time in clock ticks after boot; 0 unknown
}

// selfNS is the inode of this process's PID namespace: two processes see
// each other's PIDs only when these are equal. Where /proc is not mounted
// it is 0, and every member that could not read it is taken to share one
// namespace (the behaviour before namespaces were told apart).
var selfNS = sync.OnceValue(func() uint64 {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0
	}
	return st.Ino
})

// startTime is field 22 of /proc/pid/stat, the process's start time in
// clock ticks after boot, or 0 if it cannot be read. A PID that is reused
// by another process has another start time.
func startTime(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces
	// and parentheses: count fields after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3
	if len(f) < 20 {
		return 0
	}
	v, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// alive reports whether process pid, of the caller's namespace, may still
// be the member that recorded start (0: start unknown). EPERM means the
// process exists but belongs to someone else.
func alive(pid int, start uint64) bool {
	if unix.Kill(pid, 0) == unix.ESRCH {
		return false
	}
	if start == 0 {
		return true
	}
	now := startTime(pid)
	// unreadable: give it the benefit of the doubt; the region keeps the
	// low valueBits of a start time
	return now == 0 || now&valueMask == start&valueMask
}

func newToken() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("shared region: crypto/rand: %v", err)) // never fails on Linux
	}
	return binary.LittleEndian.Uint64(b[:])
}
