//go:build !race

package webhookingress

// raceEnabled says the race detector slows every step down; see
// race_on_test.go.
const raceEnabled = false
