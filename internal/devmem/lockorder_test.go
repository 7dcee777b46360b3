package devmem

import "github.com/fcsp-go/fcsp-go/internal/lockorder"

// This package's tests run with the lock order checked (internal/lockorder,
// docs/LOCKS.md): a lock taken out of order stops the run with its stack.
func init() { lockorder.Enable(func(msg string) { panic(msg) }) }
