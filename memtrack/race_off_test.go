//go:build !race

package memtrack

const raceEnabled = false
