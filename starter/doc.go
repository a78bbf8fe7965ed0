// Package starter starts, signals, updates and queries siteops workflows:
// the library behind `siteops onboard|leads|embed|status|webhook|secret`,
// usable by any Go program. It derives workflow IDs and their reuse and
// conflict policies from package workflows, so that every caller agrees
// with the relay. Beside the workflows it holds what operators read and
// change of the stored signing secrets without Temporal (secrets.go): an
// endpoint's secret now, the account's endpoints with theirs, retiring
// one, re-encrypting them under a new key.
//
// Other languages can start the same workflows with any Temporal SDK: the
// workflow type names and JSON inputs are in package workflows and the
// README. Only onboarding needs the store first, to keep large knowledge
// texts out of history (small texts may be inlined instead).
package starter
