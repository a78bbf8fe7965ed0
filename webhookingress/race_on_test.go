//go:build race

package webhookingress

// raceEnabled says the race detector slows every step down (five to ten
// times here): the flood tests check their latency against a scaled bound
// under it, and at their true bound without it (e2e runs them against a
// siteops ingress process built without it).
const raceEnabled = true
