// Package release says which release of siteops this binary is and which
// build: the release number orders releases for the store's
// expand-then-contract migrations (a store finalized for release N refuses
// binaries of an older release), and the build id names the Worker
// Deployment Version a versioned worker polls as.
//
// It knows nothing of Temporal or the store, so that both may ask it;
// driving a rollout (promote, drained, status, finalize) is package
// rollout's.
package release

// Release is one published release of siteops.
type Release struct {
	// Number orders releases: 1, 2, 3, ...
	Number int
	// Date is the day it was cut (YYYY-MM-DD).
	Date string
	// Commit is the commit it was cut from.
	Commit string
}

// Number is the release this binary belongs to. Processes of this binary
// record it in the store's process registry, `siteops release finalize`
// records it as finalized, and a store finalized for a later release
// refuses this binary.
const Number = 3

// The releases before this one. Previous is the one a rollout of this
// release replaces (it shares the store with this one while the rollout
// runs, and it is the one a rollback returns to); First had no Worker
// Versioning at all.
var (
	First    = Release{Number: 1, Date: "2026-11-21", Commit: "ce48bc35c37af137fe4aa22553ec71ed51018775"}
	Previous = Release{Number: 2, Date: "2026-11-24", Commit: "31c4c4ac5e9b6463f08b7201ae1ae873063980ad"}
)

// FirstRegistering is the first release whose processes record themselves
// in the store's process registry: the ones before it run unseen, so
// finalize can only ask the operator about them.
const FirstRegistering = 3
