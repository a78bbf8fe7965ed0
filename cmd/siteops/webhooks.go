package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/wiring"
	"github.com/siteops/siteops/workflows"
)

func (c *cli) webhookCmd() *cobra.Command {
	return group("webhook", "Register and list the account's webhook endpoints", c.webhookCreateCmd(), c.webhookListCmd())
}

func (c *cli) webhookCreateCmd() *cobra.Command {
	var (
		rawURL, receiver, label string
		events                  []string
		tf                      temporalFlags
		wf                      waitFlags
	)
	cmd := &cobra.Command{
		Use:   "create --url URL --events lead.created,knowledge.ready [--receiver NAME]",
		Short: "Register an endpoint and store its one-time secret; prints only the id and a fingerprint",
		Long: `Register a webhook endpoint and store its one-time signing secret, encrypted
with SITEOPS_SECRET_KEY, for the ingress receiver the URL points at
(/webhooks → the default receiver, /webhooks/NAME → NAME). The secret is
never printed: only the endpoint id and the secret's fingerprint.

It runs as a workflow (webhook-endpoint/...) on the worker, whose activity
creates the endpoint and stores the secret in one step under an idempotency
key derived from the request. So a create whose answer was lost is retried
with the same key and the service replays the same endpoint and secret, and
running the same command again reports the endpoint already registered
instead of creating a second one, with what the store holds of its secret
now (exit 1 when the secret was retired since or is gone). To register a second endpoint for the
same URL and events on purpose, give it a --label.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("receiver") {
				r, err := starter.ReceiverFromURL(rawURL)
				if err != nil {
					return usageError{err}
				}
				receiver = r
			}
			return c.withTemporal(cmd, &tf, false, wf.timeout, func(s *starter.Starter) error {
				ctx := cmd.Context() // bounded by --timeout (withTemporal)
				stop := c.watch(cmd, s, workflows.EndpointRegistrationID(rawURL, events, receiver, label), "registering the endpoint")
				reg, err := s.RegisterEndpoint(ctx, starter.EndpointRequest{URL: rawURL, Events: events, Receiver: receiver, Label: label, Operator: defaultOperator()})
				stop()
				if err != nil {
					return wf.explain(err)
				}
				st := reg.Status
				state, what := starter.SecretStored, "secret stored"
				if reg.Already {
					// The earlier run's result says what was stored then;
					// the store says what holds now.
					var at *time.Time
					state, at, err = starter.StoredSecretNow(ctx, wiring.InspectStoreFromEnv, st.EndpointID, st.Fingerprint, time.Now())
					what = registeredBefore(state, at, err)
				}
				if err := c.say(cmd, map[string]any{"workflow_id": reg.WorkflowID, "endpoint_id": st.EndpointID, "url": st.URL,
					"events": st.Events, "receiver": receiver, "fingerprint": st.Fingerprint, "already_registered": reg.Already, "secret": state},
					"endpoint %s → %s (receiver %s) for %s; %s, fingerprint %s",
					st.EndpointID, st.URL, store.ReceiverName(receiver), strings.Join(st.Events, ", "), what, st.Fingerprint); err != nil {
					return err
				}
				if !state.Accepted() {
					return reported{exitFailed}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&rawURL, "url", "", "public HTTPS receiver URL")
	cmd.Flags().StringSliceVar(&events, "events", nil, "event types to subscribe to (comma-separated)")
	cmd.Flags().StringVar(&receiver, "receiver", "", "ingress receiver name (default: from the URL)")
	cmd.Flags().StringVar(&label, "label", "", "register a second endpoint for the same URL and events on purpose")
	tf.register(cmd)
	wf.register(cmd, 5*time.Minute)
	_ = cmd.MarkFlagRequired("url")
	_ = cmd.MarkFlagRequired("events")
	return cmd
}

// registeredBefore words what the store holds now of the secret of an
// endpoint that an earlier run of the same request registered, and
// whether deliveries signed with it are accepted (starter.StoredSecretNow).
func registeredBefore(state starter.SecretState, at *time.Time, err error) string {
	const earlier = "already registered by an earlier run of this request (no second endpoint)"
	switch state {
	case starter.SecretUnknown:
		return earlier + "; whether its secret is still stored cannot be told here (" + err.Error() + "): see `siteops webhook list`"
	case starter.SecretRetiring:
		return earlier + "; its secret is stored but retires at " + at.UTC().Format(time.RFC3339) + ", when deliveries signed with it start to be refused"
	case starter.SecretRetired:
		return earlier + ", but its secret was retired at " + at.UTC().Format(time.RFC3339) +
			" (the endpoint was deleted, a rotation replaced it, or `siteops secret retire` ran): deliveries signed with it are refused; register a new endpoint with --label, and delete this one if it still exists"
	case starter.SecretNotStored:
		return earlier + ", but its secret is no longer in the store: deliveries signed with it are refused; register a new endpoint with --label, and delete this one if it still exists"
	}
	return earlier + "; its secret is stored"
}

func (c *cli) webhookListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the account's endpoints, their last delivery, and whether their secret is stored and readable",
		Long: `List the account's webhook endpoints with their last delivery and error, and
what the store holds of each one's signing secret: stored (with its
fingerprint and receiver), unreadable (it does not decrypt with
SITEOPS_SECRET_KEY: deliveries signed with it are refused until the key is
fixed or 'siteops secret rekey' runs), or not stored. Never the secrets.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := wiring.APIClientFromEnv()
			if err != nil {
				return err
			}
			// A listing reads the store as it is and creates none.
			out, err := starter.ListEndpoints(cmd.Context(), api, wiring.InspectStoreFromEnv)
			if err != nil {
				return err
			}
			return c.showList(cmd, out, out, func(w io.Writer) error { writeEndpoints(w, out); return nil })
		},
	}
	return cmd
}

// writeEndpoints words the account's endpoints and their secrets.
func writeEndpoints(w io.Writer, out []starter.Endpoint) {
	for _, e := range out {
		last := "no delivery yet"
		if d := e.LastDelivery; d != nil {
			last = fmt.Sprintf("last delivery %s %s (%d) at %s", d.EventID, d.Outcome, d.StatusCode, d.At.Format(time.RFC3339))
		}
		_, _ = fmt.Fprintf(w, "%s  %s  %s  [%s]  %s\n", e.ID, e.Status, e.URL, strings.Join(e.Events, ","), last)
		switch e.Secret {
		case starter.SecretStored:
			_, _ = fmt.Fprintf(w, "    secret stored for receiver %s, fingerprint %s\n", e.Receiver, e.Fingerprint)
		case starter.SecretUnreadable:
			_, _ = fmt.Fprintf(w, "    secret UNREADABLE: it does not decrypt with SITEOPS_SECRET_KEY; set the key it was stored with or run `siteops secret rekey`\n")
		case starter.SecretRetired:
			_, _ = fmt.Fprintf(w, "    secret RETIRED (receiver %s, fingerprint %s): deliveries signed with it are refused; delete the endpoint\n", e.Receiver, e.Fingerprint)
		case starter.SecretNotStored:
			_, _ = fmt.Fprintf(w, "    secret not stored here (from SITEOPS_WEBHOOK_SECRETS, or created elsewhere)\n")
		}
		if e.LastError != nil {
			_, _ = fmt.Fprintf(w, "    last error: %s\n", *e.LastError)
		}
	}
}

func (c *cli) secretCmd() *cobra.Command {
	return group("secret", "Rotate a webhook endpoint's signing secret with an overlap; retire and re-encrypt stored secrets",
		c.secretRotateCmd(), c.secretDecideCmd(workflows.RotationProceed), c.secretDecideCmd(workflows.RotationAbort), c.secretRetireCmd(), c.secretRekeyCmd(), c.secretListCmd())
}

func (c *cli) secretRotateCmd() *cobra.Command {
	var (
		endpoint, rawURL, receiver, operator string
		verify, decide, grace                time.Duration
		wait                                 bool
		tf                                   temporalFlags
		wf                                   waitFlags
	)
	cmd := &cobra.Command{
		Use:   "rotate --endpoint ID --url URL [--wait]",
		Short: "Rotate an endpoint's secret: new endpoint, overlap, verified delivery, delete the old one",
		Long: `Start secret-rotation/<endpoint>: create a second endpoint with the same events
at URL (a versioned path such as /webhooks/v2, or the same URL), store its
secret, accept both secrets, wait for a verified delivery on the new endpoint,
delete the old endpoint, and retire its secret after the grace period. If no
verified delivery comes within --verify-timeout, decide with
'siteops secret proceed|abort --endpoint ID' within --decision-timeout
(--wait then ends, exit 1, saying so: the rotation waits for you);
nobody deciding aborts (the new endpoint is deleted, the old secret stays).
'siteops status secret-rotation/ID' shows where it stands.

A rotation that fails or is cancelled cleans up: before the old endpoint is
deleted it rolls back, after it completes. Running the same command again
after a run was terminated takes over the endpoint that run created.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.withTemporal(cmd, &tf, false, wf.timeout, func(s *starter.Starter) error {
				ctx := cmd.Context() // bounded by --timeout (withTemporal)
				run, err := s.RotateSecret(ctx, starter.RotationRequest{
					OldEndpointID: endpoint, NewURL: rawURL, Receiver: receiver, VerifyTimeout: verify, DecisionTimeout: decide, GracePeriod: grace, Operator: operator,
				})
				if err != nil {
					return err
				}
				if !wait {
					return c.say(cmd, map[string]string{"workflow_id": run.GetID(), "run_id": run.GetRunID()}, "started %s; follow it with: siteops status %s", run.GetID(), run.GetID())
				}
				stop := c.watch(cmd, s, run.GetID(), "started")
				st, err := s.WaitRotation(ctx, run)
				stop()
				if err != nil {
					return wf.explain(err)
				}
				return c.say(cmd, st, "%s", starter.RotationOutcome(run.GetID(), st))
			})
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "id of the endpoint whose secret is rotated")
	cmd.Flags().StringVar(&rawURL, "url", "", "URL of the new endpoint")
	cmd.Flags().StringVar(&receiver, "receiver", "", "ingress receiver of the new URL (default: from the URL)")
	cmd.Flags().DurationVar(&verify, "verify-timeout", 10*time.Minute, "how long to wait for a verified delivery on the new endpoint")
	cmd.Flags().DurationVar(&decide, "decision-timeout", 24*time.Hour, "how long on-call has to decide after --verify-timeout; then the rotation aborts")
	cmd.Flags().DurationVar(&grace, "grace", time.Hour, "how long the old secret stays accepted after the old endpoint is deleted")
	operatorFlag(cmd, &operator, "who is acting")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the rotation to finish")
	tf.register(cmd)
	wf.register(cmd, 0)
	_ = cmd.MarkFlagRequired("endpoint")
	_ = cmd.MarkFlagRequired("url")
	return cmd
}

func (c *cli) secretDecideCmd(action string) *cobra.Command {
	var (
		endpoint, operator string
		tf                 temporalFlags
		wf                 waitFlags
		cf                 confirmFlags
	)
	short := "Delete the old endpoint although no verified delivery came on the new one"
	if action == workflows.RotationAbort {
		short = "Abort the rotation: delete the new endpoint and keep the old one"
	}
	cmd := &cobra.Command{
		Use:   action + " --endpoint ID [--dry-run] [--yes]",
		Short: short,
		Long: short + `, once the rotation
waits for a decision (no verified delivery came on the new endpoint within
its --verify-timeout). It reads the rotation first and says what the
decision would change: with --dry-run only that; on a terminal it asks
before it decides, unless --yes; elsewhere it needs --yes (exit 2 without
it). It returns once the rotation has ended, saying how, and when the old
secret stops being accepted. A rotation that does not run exits 3, one that
waits for no decision 2; nothing is sent then.`,
		Example: "  siteops secret " + action + " --endpoint we_1 --dry-run\n  siteops secret " + action + " --endpoint we_1 --yes",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.withTemporal(cmd, &tf, false, wf.timeout, func(s *starter.Starter) error {
				ch, err := decisionChange(cmd.Context(), s, endpoint, action)
				if err != nil {
					return wf.explain(err)
				}
				if ok, err := c.confirm(cmd, &cf, ch); err != nil || !ok {
					return err
				}
				stop := c.watch(cmd, s, workflows.SecretRotationID(endpoint), action+" sent")
				st, err := s.DecideRotation(cmd.Context(), endpoint, action, operator)
				stop()
				if err != nil {
					return wf.explain(err)
				}
				// The update answers once the rotation has ended: say how,
				// and when the old secret stops being accepted.
				return c.say(cmd, st, "%s", starter.RotationOutcome(workflows.SecretRotationID(endpoint), st))
			})
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "id of the endpoint being rotated (the old one)")
	operatorFlag(cmd, &operator, "who is acting")
	cf.register(cmd)
	tf.register(cmd)
	wf.register(cmd, embedWait)
	_ = cmd.MarkFlagRequired("endpoint")
	return cmd
}

func (c *cli) secretRekeyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rekey",
		Short: "Re-encrypt the stored signing secrets from SITEOPS_OLD_SECRET_KEY to SITEOPS_SECRET_KEY",
		Long: `Re-encrypt every stored signing secret that decrypts with the previous key
(` + wiring.OldSecretKeyEnv + `) under the current one (SITEOPS_SECRET_KEY), in one
transaction, in the current format: a key derived for this purpose alone
(HKDF), bound to the endpoint, its receiver and its retirement, with the
key's id beside it. Without ` + wiring.OldSecretKeyEnv + ` it only brings secrets stored in
the first format (bound to the endpoint id alone) to the current one;
'siteops release finalize' does that too. Secrets already in the current
format under the current key are left alone, so it is safe to run twice. A
secret that opens with neither key is left as it was (rewriting it would
leave it readable by no key): rekey names it and exits 4. Keys come
from the environment, never from flags. Run it before the worker and the
ingress restart with the new key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			old, err := wiring.OldSecretKeyFromEnv()
			if err != nil {
				return err
			}
			st, err := wiring.OpenExistingStoreFromEnv(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = st.Close() }()
			res, err := starter.Rekey(cmd.Context(), st, old)
			if err != nil {
				return err
			}
			// The JSON result counts the secrets left unreadable; the text
			// ends in the error.
			return c.show(cmd, res, func(w io.Writer) error {
				_, _ = fmt.Fprintf(w, "re-encrypted %d secret(s) under SITEOPS_SECRET_KEY\n", res.Reencrypted)
				if res.StillUnreadable > 0 {
					which := "do not decrypt with SITEOPS_SECRET_KEY, and " + wiring.OldSecretKeyEnv + " is not set"
					if old != nil {
						which = "decrypt with neither SITEOPS_SECRET_KEY nor " + wiring.OldSecretKeyEnv + " (they were stored under a third key)"
					}
					return fmt.Errorf("%d active secret(s) %s: %s, left as they were; run rekey again with the key that sealed them as %s: %w",
						res.StillUnreadable, which, strings.Join(res.Unreadable, ", "), wiring.OldSecretKeyEnv, store.ErrKeyMismatch)
				}
				return nil
			})
		},
	}
}
