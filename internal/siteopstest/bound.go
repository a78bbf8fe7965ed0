package siteopstest

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// MaxLoadFactor bounds how far a machine's load stretches a wall-clock
// bound (LoadFactor).
const MaxLoadFactor = 3

// Bound is the wall-clock bound a test checks for a step whose goal is d:
// d itself on a machine with room, three times d under the race detector
// (which slows every step five to ten times), and either stretched by the
// machine's load (LoadFactor). The goals themselves are checked at d by
// the benchmarks and by make soak, which run without the race detector;
// a test's bound only has to catch what is wrong (a step that hangs, a
// flood that starves), not measure.
func Bound(d time.Duration) time.Duration { return BoundRace(d, 3*d) }

// BoundRace is Bound with the bound under the race detector given.
func BoundRace(d, underRace time.Duration) time.Duration {
	if Race {
		d = underRace
	}
	return time.Duration(float64(d) * LoadFactor())
}

// LoadFactor is how much busier than its cores the machine has been over
// the last minute (/proc/loadavg's first figure over the CPU count), from
// 1 (no more runnable work than cores, or no /proc) to MaxLoadFactor: on
// two cores under make test's load of 4 to 6, a step takes that much
// longer than on an idle machine.
func LoadFactor() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 1
	}
	return loadFactor(string(b), runtime.NumCPU())
}

func loadFactor(loadavg string, cpus int) float64 {
	fields := strings.Fields(loadavg)
	if len(fields) == 0 || cpus <= 0 {
		return 1
	}
	load, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return 1
	}
	return min(max(load/float64(cpus), 1), MaxLoadFactor)
}
