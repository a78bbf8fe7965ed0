package main

import (
	"context"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/inbox"
	"github.com/siteops/siteops/overview"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/wiring"
	"github.com/siteops/siteops/workflows"
)

// `siteops completion bash|zsh|fish|powershell` (cobra's) prints the
// shell's completion script; the script asks `siteops __complete` for
// values as one types. This file lists the values siteops can name: site
// ids and workflow ids of recent runs (Temporal's visibility), endpoint
// ids, fingerprints and receivers of the stored secrets (the store, read
// only), the inbox's outcomes, event types and output formats. A shell
// waits for the answer: each look-up has completionBudget and says
// nothing when it fails (no store, Temporal down): the shell then offers
// nothing.

// completionBudget bounds each look-up of a completion.
const completionBudget = 1500 * time.Millisecond

// completions registers the completions of the flags (and arguments) of
// every command under root, by flag name: a flag is completed wherever it
// is, so that a new command's --site completes like the others'.
func (c *cli) completions(root *cobra.Command) {
	fixed := func(values ...string) cobra.CompletionFunc {
		return func(_ *cobra.Command, _ []string, typed string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return matching(values, typed), cobra.ShellCompDirectiveNoFileComp
		}
	}
	var types []string
	for _, t := range webhook.EventTypes() {
		types = append(types, string(t))
	}
	flags := map[string]cobra.CompletionFunc{
		"site":        completeSites,
		"outcome":     fixed(inbox.EventStates()...),
		"type":        fixed(types...),
		"endpoint":    storedSecrets(func(s store.SecretInfo) string { return s.EndpointID }),
		"fingerprint": storedSecrets(func(s store.SecretInfo) string { return s.Fingerprint }),
		"receiver":    storedSecrets(func(s store.SecretInfo) string { return s.Receiver }),
		"state":       fixed(overview.SecretStates...),
	}
	_ = root.RegisterFlagCompletionFunc("output", fixed(outputFormats...))
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		for name, f := range flags {
			if cmd.LocalNonPersistentFlags().Lookup(name) != nil {
				_ = cmd.RegisterFlagCompletionFunc(name, f)
			}
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for _, sub := range root.Commands() {
		if sub.Name() == "status" {
			sub.ValidArgsFunction = completeWorkflowIDs
		}
	}
}

// matching keeps the values that begin with typed, each once, in order.
func matching(values []string, typed string) []cobra.Completion {
	var out []cobra.Completion
	for _, v := range values {
		if v != "" && strings.HasPrefix(v, typed) && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// completeSites offers the sites of recent lead syncs and embed
// incidents, newest first; for embed on and close, the sites with an open
// incident.
func completeSites(cmd *cobra.Command, _ []string, typed string) ([]cobra.Completion, cobra.ShellCompDirective) {
	query := "WorkflowType IN ('" + workflows.LeadSyncWorkflowName + "', '" + workflows.EmbedIncidentWorkflowName + "')"
	if p := cmd.Parent(); p != nil && p.Name() == "embed" && (cmd.Name() == "on" || cmd.Name() == "close") {
		query = "WorkflowType = '" + workflows.EmbedIncidentWorkflowName + "' AND ExecutionStatus = 'Running'"
	}
	var sites []string
	for _, id := range recentWorkflows(cmd, query) {
		if k, ok := workflows.KindOf(id); ok {
			sites = append(sites, strings.TrimPrefix(id, k.Prefix))
		}
	}
	return matching(sites, typed), cobra.ShellCompDirectiveNoFileComp
}

// completeWorkflowIDs offers the ids of recent siteops workflows, newest
// first, for status.
func completeWorkflowIDs(cmd *cobra.Command, args []string, typed string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := make([]string, len(workflows.Catalogue))
	for i, k := range workflows.Catalogue {
		names[i] = "'" + k.Name + "'"
	}
	ids := recentWorkflows(cmd, "WorkflowType IN ("+strings.Join(names, ", ")+")")
	return matching(ids, typed), cobra.ShellCompDirectiveNoFileComp
}

// recentWorkflows lists the ids of the newest workflows query selects,
// through the connection cmd's flags and the environment name; none when
// Temporal does not answer within completionBudget.
func recentWorkflows(cmd *cobra.Command, query string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), completionBudget)
	defer cancel()
	var tf temporalFlags
	tf.address, _ = cmd.Flags().GetString("address")
	tf.namespace, _ = cmd.Flags().GetString("namespace")
	tf.profile, _ = cmd.Flags().GetString("profile")
	return within(ctx, func() []string {
		t, err := tf.load()
		if err != nil {
			return nil
		}
		s, closeAll, err := wiring.Starter(ctx, t, nil, quietLogger(io.Discard))
		if err != nil {
			return nil
		}
		defer closeAll()
		resp, err := s.Client().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: s.Namespace(), PageSize: 200, Query: query})
		if err != nil {
			return nil
		}
		var ids []string
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		return ids
	})
}

// storedSecrets offers what field names of each active stored secret.
func storedSecrets(field func(store.SecretInfo) string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, typed string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ctx, cancel := context.WithTimeout(context.Background(), completionBudget)
		defer cancel()
		values := within(ctx, func() []string {
			st, _, err := wiring.InspectStoreFromEnv(ctx)
			if err != nil {
				return nil
			}
			defer func() { _ = st.Close() }()
			secrets, err := st.Secrets(ctx)
			if err != nil {
				return nil
			}
			var out []string
			for _, s := range secrets {
				out = append(out, field(s))
			}
			return out
		})
		return matching(values, typed), cobra.ShellCompDirectiveNoFileComp
	}
}

// within runs look, and gives up on it when ctx ends first: a completion
// never holds the shell longer than its budget, whatever look waits on.
func within(ctx context.Context, look func() []string) []string {
	got := make(chan []string, 1)
	go func() { got <- look() }()
	select {
	case v := <-got:
		return v
	case <-ctx.Done():
		return nil
	}
}
