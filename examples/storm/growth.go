package main

import (
	"runtime/debug"
	"strings"
)

// growthAtOnce names the SDK's growth at once (internal/smmove's growth),
// which this binary has where it was linked with it: scripts/gpu-test.sh
// builds storm-atonce so, for an A/B of how a latency class's growth takes
// the rest's SMs.
const growthAtOnce = "at-once"

// linkedGrowth is the growth this binary was linked with, as its build
// settings record the linker's flags (go version -m prints them):
// growthAtOnce, or "" for the default, a growth that waits for the work
// the rest queued on the SMs it takes.
func linkedGrowth() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return growthOf(bi.Settings)
}

// growthOf reads the growth from a binary's build settings.
func growthOf(settings []debug.BuildSetting) string {
	for _, s := range settings {
		if s.Key == "-ldflags" && strings.Contains(s.Value, "internal/smmove.growth="+growthAtOnce) {
			return growthAtOnce
		}
	}
	return ""
}
