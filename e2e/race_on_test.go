//go:build race

package e2e

// raceEnabled says the race detector slows every step down (five to ten
// times here): timing goals are checked against a scaled bound, and at
// their true bound by make soak, which runs without it.
const raceEnabled = true
