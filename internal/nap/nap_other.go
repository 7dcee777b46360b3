//go:build !linux

package nap

import "time"

// Sleep is time.Sleep where nanosleep is not asked directly.
func Sleep(d time.Duration) { time.Sleep(d) }
