//go:build !race

package siteopstest

// Race says the race detector is on (Bound).
const Race = false
