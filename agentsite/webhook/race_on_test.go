//go:build race

package webhook

// raceEnabled says the race detector is on: sync.Pool then drops a quarter
// of what is put back, on purpose, so allocation counts mean nothing.
const raceEnabled = true
