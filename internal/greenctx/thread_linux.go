package greenctx

import "golang.org/x/sys/unix"

// threadID is the calling OS thread's id; it names the holder of a
// partition's exclusion.
func threadID() int { return unix.Gettid() }
