//go:build !race

package e2e

// raceEnabled says the race detector slows every step down; see
// race_on_test.go.
const raceEnabled = false
