package wiring

import (
	"fmt"
	"strings"

	"github.com/siteops/siteops/relay"
	"github.com/siteops/siteops/workflows"
)

// OncallKinds are the kinds the CLI starts, signals and updates for
// on-call: the playbooks, and the onboarding, registration and lead sync
// commands. The oncall role of siteops' server build may start these and
// no other (SITEOPS_TEMPORAL_ONCALL_STARTS).
var OncallKinds = []workflows.Kind{workflows.EmbedIncidentKind, workflows.SecretRotationKind, workflows.EndpointRegistrationKind,
	workflows.LeadSyncKind, workflows.OnboardingKind}

// TemporalPolicy is the environment that turns on the role policy of
// siteops' server build (deploy/temporal-server) for siteops in namespace
// on taskQueue: what the relay starts and signals and what on-call starts,
// as the catalogue and the route table say. deploy/'s ConfigMap and the
// test clusters set exactly this; deploy/tls_test.go holds them together.
func TemporalPolicy(namespace, taskQueue string) map[string]string {
	starts := func(kinds []workflows.Kind) string {
		var out []string
		for _, k := range kinds {
			out = append(out, fmt.Sprintf("%s=%s@%d", k.Name, k.Prefix, int(k.Class)))
		}
		return strings.Join(out, ",")
	}
	var relayStarts []workflows.Kind
	for _, name := range relay.StartedTypes() {
		k, _ := workflows.KindNamed(name)
		relayStarts = append(relayStarts, k)
	}
	var signals []string
	for _, s := range relay.SentSignals() {
		signals = append(signals, s.Prefix+":"+s.Name)
	}
	return map[string]string{
		"SITEOPS_TEMPORAL_NAMESPACE":     namespace,
		"SITEOPS_TEMPORAL_TASK_QUEUE":    taskQueue,
		"SITEOPS_TEMPORAL_RELAY_STARTS":  starts(relayStarts),
		"SITEOPS_TEMPORAL_RELAY_SIGNALS": strings.Join(signals, ","),
		"SITEOPS_TEMPORAL_ONCALL_STARTS": starts(OncallKinds),
	}
}
