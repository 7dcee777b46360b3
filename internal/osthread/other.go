//go:build !linux

package osthread

// 0 where the thread cannot be named, as internal/smpart's threadID (the
// SDK runs on Linux only; this keeps the package building elsewhere).
func id() int { return 0 }
