package nexus

import (
	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/workflows"
)

// Plaintext lists the types of the answers that cross the Nexus boundary
// to callers who do not hold SITEOPS_PAYLOAD_KEY — a partner's namespace,
// a plain HTTP caller — for codec.Options.Plaintext: a worker's codec
// writes them in plaintext, authenticated under the key, and encrypts
// everything else.
// Partners never need the key, which reads every history of siteops.
//
//   - The synchronous operations' results: the worker's data converter
//     writes what a handler returns, and the server passes that payload on
//     as it is (to the caller's history, or as the HTTP answer's body).
//   - The Onboarding workflow's result: onboard is a run of it, and the
//     server's completion callback hands the caller the result payload the
//     worker wrote into siteops' history. Whoever started the run — a
//     caller may join one that the CLI started — so every onboarding's
//     result is written so.
//
// Errors need nothing: Temporal's default failure converter, which siteops
// uses, writes failure messages and details without the codec.
//
// Every field of these types can be read by anyone: ids, states, counts,
// times, hashes of the caller's own texts, and the root cause of a failure,
// whose message is in the clear in the failure anyway — never secrets,
// lead data, knowledge texts, site content or incident reasons. A test
// fails when one of them gains a field, so that whoever adds it says why
// it may be read by anyone.
func Plaintext() []any {
	return []any{
		api.StoreKnowledgeOutput{},
		api.OnboardResult{},
		api.Onboarding{},
		api.LeadSyncProgress{},
		workflows.OnboardingResult{},
	}
}
