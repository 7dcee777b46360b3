//go:build !race

package fcsp

const raceEnabled = false
