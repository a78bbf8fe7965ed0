package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/siteops/siteops/release"
	"github.com/siteops/siteops/rollout"
	"github.com/siteops/siteops/starter"
)

// version is set at build time with -ldflags "-X main.version=..."; when it
// is not, the module version from the build info is used.
var version = ""

// buildVersion is siteops' version: the one set at link time, else the
// module's from the build info, with the VCS revision when known.
func buildVersion() string { return release.Version(version) }

// cli is one invocation of the command line.
type cli struct {
	output string // -o: text, json or jsonl
	// ran is set once a command's own code runs: an error before that is
	// a usage error.
	ran bool
	// waiting shows what the command waits for, while it waits (phases).
	waiting *phases
	// interactive, when set, says whether a question may be asked
	// (tests); else it may where standard input and standard error are a
	// terminal.
	interactive func(cmd *cobra.Command) bool
}

func newCLI() *cli { return &cli{} }

// json reports whether the output is JSON: -o json, or -o jsonl (one
// object a line). Errors and warnings are JSON objects then too.
func (c *cli) json() bool { return c.output == "json" || c.output == "jsonl" }

func (c *cli) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "siteops",
		Short: "Automate the Agent-Site API with durable Temporal workflows",
		Long: `siteops automates the Agent-Site API with durable Temporal workflows.

Configuration comes from environment variables (see the README); secrets have
no defaults and are never printed. The Temporal connection is read as the
temporal CLI reads it: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY,
TEMPORAL_TLS_*, and TEMPORAL_PROFILE / TEMPORAL_CONFIG_FILE profiles; the
--address, --namespace and --profile flags win over them.

` + exitCodesHelp,
		Version:       buildVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		// Alone it prints its help, as temporal, kubectl and gh do; a
		// word that is no command is a usage error with a suggestion.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return groupRunE(cmd, args)
		},
	}
	root.SetVersionTemplate("siteops {{.Version}}\n")
	root.PersistentFlags().StringVarP(&c.output, "output", "o", "text", "output format: text; json for scripts; jsonl, one JSON object a line (a list's items one a line). With json and jsonl, errors are JSON on standard error too")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if !slices.Contains(outputFormats, c.output) {
			return usageError{fmt.Errorf("--output %q: use %s", c.output, strings.Join(outputFormats, ", "))}
		}
		return nil
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		// "embed of --site x": the word that is no subcommand is the
		// mistake, not the flag the group does not take.
		if args := cmd.Flags().Args(); cmd.HasAvailableSubCommands() && len(args) > 0 {
			return groupRunE(cmd, args)
		}
		return usageError{suggestFlag(cmd, err)}
	})
	root.AddCommand(
		c.versionCmd(), c.signatureCmd(), newSimCmd(), c.workerCmd(), c.ingressCmd(), c.doctorCmd(),
		c.onboardCmd(), c.leadsCmd(), c.embedCmd(), c.statusCmd(), c.overviewCmd(),
		c.secretCmd(), c.webhookCmd(), c.eventsCmd(), c.demoCmd(), c.codecServerCmd(), c.probeCmd(), c.releaseCmd(),
	)
	c.markRuns(root)
	c.completions(root)
	return root
}

// outputFormats are the values of -o.
var outputFormats = []string{"text", "json", "jsonl"}

// markRuns wraps every command's RunE so that errors from flags, arguments
// and required flags (cobra reports them before RunE) are told apart from
// errors of the work itself.
func (c *cli) markRuns(cmd *cobra.Command) {
	if run := cmd.RunE; run != nil && cmd.HasParent() && !cmd.HasSubCommands() {
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			c.ran = true
			return run(cmd, args)
		}
	}
	for _, sub := range cmd.Commands() {
		c.markRuns(sub)
	}
}

// group makes a command whose work is done by its subcommands; called
// alone or with an unknown subcommand it is a usage error that lists them
// (with a suggestion for a near miss), never help with exit 0.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.ArbitraryArgs, RunE: groupRunE}
	cmd.AddCommand(subs...)
	return cmd
}

func groupRunE(cmd *cobra.Command, args []string) error {
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	if len(args) == 0 {
		return usageError{fmt.Errorf("%s needs a subcommand: %s (see %s --help)", cmd.CommandPath(), strings.Join(names, ", "), cmd.CommandPath())}
	}
	msg := fmt.Sprintf("unknown command %q for %s", args[0], cmd.CommandPath())
	if s := suggest(cmd, args[0]); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %s?", strings.Join(s, " or "))
	} else {
		msg += "; choose one of: " + strings.Join(names, ", ")
	}
	return usageError{errors.New(msg)}
}

// suggest returns the subcommands a mistyped name probably meant: those
// it begins, and those at most two edits away (cobra's suggestions).
func suggest(cmd *cobra.Command, typed string) []string {
	cmd.SuggestionsMinimumDistance = 2
	return cmd.SuggestionsFor(typed)
}

// suggestFlag adds to pflag's "unknown flag: --dryrun" the flags of cmd
// that were probably meant (--dry-run): those the typed name begins, and
// those at most two edits away, as suggest does for subcommands.
func suggestFlag(cmd *cobra.Command, err error) error {
	typed, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok || typed == "" {
		return err
	}
	var near []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && (strings.HasPrefix(f.Name, typed) || starter.EditDistance(typed, f.Name) <= 2) {
			near = append(near, "--"+f.Name)
		}
	})
	if len(near) == 0 {
		return fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath())
	}
	slices.Sort(near)
	return fmt.Errorf("%w; did you mean %s?", err, strings.Join(near, " or "))
}

func (c *cli) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the siteops version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := rollout.ThisBuild(buildVersion(), os.Getenv("SITEOPS_BUILD_ID"))
			line := fmt.Sprintf("release %d, build id %s (from %s)", b.Release, b.BuildID, b.BuildIDSource)
			if b.BuildIDError != "" {
				line = fmt.Sprintf("release %d, no build id: %s", b.Release, b.BuildIDError)
			}
			return c.say(cmd, b, "siteops %s\n%s", b.Version, line)
		},
	}
}
