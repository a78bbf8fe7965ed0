package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/siteops/siteops/inbox"
	"github.com/siteops/siteops/release"
	"github.com/siteops/siteops/rollout"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// What each command that asks first (confirm.go) would change, in the
// words its dry run and its question use.

// decisionChange reads the rotation of endpoint and says what deciding it
// with action (proceed or abort) would change. A rotation that does not
// run is ErrNotFound, and one that waits for no decision a usage error:
// nothing is sent either way. When no worker answers its status query, it
// says what the decision does in general.
func decisionChange(ctx context.Context, s *starter.Starter, endpoint, action string) (change, error) {
	id := workflows.SecretRotationID(endpoint)
	st, err := s.Status(ctx, id)
	switch {
	case errors.Is(err, starter.ErrNotFound):
		return change{}, notFoundError{fmt.Sprintf("no rotation of endpoint %s is running (no workflow %s); nothing was sent", endpoint, id)}
	case err != nil:
		return change{}, err
	case st.Status != "Running":
		return change{}, notFoundError{fmt.Sprintf("no rotation of endpoint %s is running (%s %s); nothing was sent", endpoint, id, strings.ToLower(st.Status))}
	}
	rot, _ := st.Detail.(*workflows.SecretRotationStatus)
	if rot == nil {
		ch := change{Summary: action + " " + id, Items: []string{
			"its status cannot be read here (" + st.DetailMissing + "); it takes a decision only while it waits for one",
		}}
		if action == workflows.RotationAbort {
			ch.Items = append([]string{"delete the rotation's new endpoint and retire its secret; keep the old endpoint " + endpoint + " and its secret as they are"}, ch.Items...)
		} else {
			ch.Items = append([]string{"delete the old endpoint " + endpoint + " although no verified delivery came on the new one; its stored secret retires after the rotation's grace period"}, ch.Items...)
		}
		return ch, nil
	}
	if rot.Step != workflows.RotationDeciding {
		return change{}, usageError{fmt.Errorf("%s is at step %s, not waiting for a decision (it waits for one only after its --verify-timeout passed without a verified delivery); nothing was sent", id, rot.Step)}
	}
	waits := "it waits for a decision: no verified delivery came on the new endpoint " + rot.NewEndpointID
	if !rot.DecisionDeadline.IsZero() {
		waits += " (nobody deciding aborts it at " + rot.DecisionDeadline.UTC().Format(time.RFC3339) + ")"
	}
	if action == workflows.RotationAbort {
		kept := fmt.Sprintf("keep the old endpoint %s and its secret as they are: deliveries signed with it stay accepted, and nothing retires it", rot.OldEndpointID)
		if !rot.OldSecretStored {
			kept = fmt.Sprintf("keep the old endpoint %s; its secret is not stored here (SITEOPS_WEBHOOK_SECRETS) and stays accepted", rot.OldEndpointID)
		}
		return change{Summary: "abort " + id, Items: []string{
			waits,
			fmt.Sprintf("delete the new endpoint %s (fingerprint %s) and retire its secret", rot.NewEndpointID, rot.NewFingerprint),
			kept,
		}}, nil
	}
	retire := "retire the old endpoint's stored secret after the rotation's grace period (its --grace): deliveries signed with it are refused from then on"
	if !rot.OldSecretStored {
		retire = "the old endpoint's secret is not stored here (SITEOPS_WEBHOOK_SECRETS): remove it from there after the grace period"
	}
	return change{Summary: "go ahead with " + id + " without a verified delivery", Items: []string{
		waits,
		fmt.Sprintf("delete the old endpoint %s (this cannot be undone): its events are delivered to the new endpoint %s (fingerprint %s) only", rot.OldEndpointID, rot.NewEndpointID, rot.NewFingerprint),
		retire,
	}}, nil
}

// notFoundError is a message that exits 3 (starter.ErrNotFound) without
// ending in "not found".
type notFoundError struct{ msg string }

func (e notFoundError) Error() string        { return e.msg }
func (e notFoundError) Is(target error) bool { return target == starter.ErrNotFound }

// retireChange says what retiring the secret of plan would change, and
// whether it asks first: retiring is never undone, but a secret that
// already retires no later changes nothing and is not asked about. A
// secret that does not open with the key is refused (without --unreadable,
// anyway false): refused says so, for a dry run; the command itself
// leaves the refusal to retire, which writes nothing.
func retireChange(p starter.RetirePlan, now time.Time, anyway bool) (ch change, asks bool, refused error) {
	secret := fmt.Sprintf("the secret of endpoint %s (receiver %s, fingerprint %s)", p.EndpointID, store.ReceiverName(p.Receiver), p.Fingerprint)
	ch.JSON = dryRunRetire{DryRun: true, RetirePlan: p}
	switch {
	case p.Unreadable && !anyway:
		return ch, false, fmt.Errorf("nothing changed (dry run); secret retire would refuse %s: it does not decrypt with SITEOPS_SECRET_KEY, and rewriting it would leave it readable by no key (--unreadable retires it anyway): %w", secret, store.ErrKeyMismatch)
	case p.Unchanged:
		ch.Summary = fmt.Sprintf("change nothing: %s already stops being accepted at %s (a retirement is never postponed)", secret, p.At.Format(time.RFC3339))
		return ch, false, nil
	}
	when := "now"
	if p.At.After(now) {
		when = "at " + p.At.Format(time.RFC3339)
	}
	ch.Summary = "retire " + secret + " " + when
	ch.Items = []string{
		"the ingress refuses deliveries signed with it from " + p.At.Format(time.RFC3339) + " on (within a second of that)",
		"this cannot be undone: a retirement is never postponed",
	}
	if p.Unreadable {
		ch.Items = append(ch.Items, "it does not decrypt with SITEOPS_SECRET_KEY: after this no key opens it (--unreadable)")
	}
	return ch, true, nil
}

// dryRunRetire is a dry run of secret retire with -o json.
type dryRunRetire struct {
	DryRun  bool `json:"dry_run"`
	Changed bool `json:"changed"`
	starter.RetirePlan
}

// bulkReplay is the most events a replay takes without asking first
// (dead letters aside): more is a bulk change.
const bulkReplay = 10

// replayChange says which events a replay would queue again: those of
// preview, a dry run's result.
func replayChange(preview inbox.ReplayResult, limit int) change {
	ch := change{JSON: dryRunReplay{ReplayResult: preview}}
	if len(preview.Replayed) == 0 {
		ch.Summary = "replay nothing: no events match"
		return ch
	}
	ch.Summary = fmt.Sprintf("queue %d event(s) for the relay again, as %s (each made due at once, its failures forgotten, the replay recorded)", len(preview.Replayed), preview.Operator)
	for _, r := range preview.Replayed {
		ch.Items = append(ch.Items, replayLine(r))
	}
	if preview.MoreMatched {
		ch.More = func(w io.Writer) {
			_, _ = fmt.Fprintf(w, "more events matched than --limit %d: only the newest %d are taken\n", limit, limit)
		}
	}
	return ch
}

// dryRunReplay is a dry run of events replay with -o json: the events as
// they are (dry_run true), and nothing changed.
type dryRunReplay struct {
	Changed bool `json:"changed"`
	inbox.ReplayResult
}

// replayLine is a replayed event, one line: what it was, and what a
// replay can change.
func replayLine(r inbox.Replay) string {
	return fmt.Sprintf("%s  %s  %s  was %s: %s", r.EventID, r.Type, dash(r.SiteID), r.PreviousStatus, r.Note)
}

// replayedIDs are the ids of the events of a replay.
func replayedIDs(res inbox.ReplayResult) []string {
	ids := make([]string, len(res.Replayed))
	for i, r := range res.Replayed {
		ids[i] = r.EventID
	}
	return ids
}

// finalizeChange says what finalize would change once every check passed.
func finalizeChange(rep rollout.FinalizeReport) change {
	p := rep.Plan
	return change{
		Summary: fmt.Sprintf("run release %d's contract steps and record it as finalized", rep.Release),
		Items: []string{
			fmt.Sprintf("re-seal %d signing secret(s) stored in the first format (%d active) in the current format", p.LegacySecrets, p.LegacyActive),
			fmt.Sprintf("date %d knowledge text(s) stored without used_at", p.UnusedTexts),
			fmt.Sprintf("record release %d as finalized: rolling back to release %d is no longer supported after it, and binaries of release %d and later refuse a store finalized for a later release than theirs",
				rep.Release, release.Previous.Number, release.FirstRegistering),
		},
		More: func(w io.Writer) {
			_, _ = fmt.Fprintln(w, "checks, all passed:")
			printChecks(w, rep)
		},
		JSON: dryRunFinalize{DryRun: true, FinalizeReport: rep},
	}
}
