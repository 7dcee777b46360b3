package smpart

import "github.com/fcsp-go/fcsp-go/internal/osthread"

// threadID is the calling OS thread's id; it names the holder of a
// partition's exclusion.
func threadID() int { return osthread.ID() }
