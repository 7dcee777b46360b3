//go:build !linux

package smpart

// threadID is 0 where the thread cannot be named: Hold then never nests,
// and a nested call waits (the SDK runs on Linux only; this keeps the
// package building elsewhere).
func threadID() int { return 0 }
