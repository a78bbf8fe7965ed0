//go:build !race

package webhook

// raceEnabled says the race detector is off.
const raceEnabled = false
