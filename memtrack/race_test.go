//go:build race

package memtrack

func init() { raceRounds = 4000 }
