package workflows

import (
	"fmt"
	"time"

	"github.com/siteops/siteops/agentsite/webhook"
)

// Summary implements Status.
func (s *OnboardingStatus) Summary() []string {
	lines := []string{fmt.Sprintf("step %s  site %s  knowledge %d/%d added, %d ready  FAQs %d",
		s.Step, orNone(s.SiteID), s.KnowledgeAdded, s.KnowledgeTotal, s.KnowledgeReady, s.FAQsAdded)}
	if s.Error != "" {
		lines = append(lines, "error: "+s.Error)
	}
	return lines
}

// State says in a word what the sync is doing: syncing, caught up or
// waiting.
func (p *LeadSyncProgress) State() string {
	switch {
	case p.Syncing:
		return "syncing"
	case p.CaughtUp:
		return "caught up"
	}
	return "waiting"
}

// Summary implements Status.
func (p *LeadSyncProgress) Summary() []string {
	last := "never"
	if !p.LastSyncAt.IsZero() {
		last = p.LastSyncAt.Format(time.RFC3339)
	}
	return []string{fmt.Sprintf("%d leads stored, %d pages read over %d syncs; %s; last sync %s; %d events (%d duplicates)",
		p.Leads, p.Pages, p.Syncs, p.State(), last, p.Events, p.DuplicateEvents)}
}

// Summary implements Status.
func (s *EmbedIncidentStatus) Summary() []string {
	lines := []string{fmt.Sprintf("state %s  opened by %s: %s", s.State, s.Operator, s.Reason)}
	if s.Decision != "" {
		lines = append(lines, fmt.Sprintf("decision %s by %s", s.Decision, s.DecidedBy))
	}
	return lines
}

// Summary implements Status.
func (s *SecretRotationStatus) Summary() []string {
	lines := []string{fmt.Sprintf("step %s  old endpoint %s  new endpoint %s (fingerprint %s)", s.Step, s.OldEndpointID, orNone(s.NewEndpointID), orNone(s.NewFingerprint))}
	if s.VerifiedEventID != "" {
		lines = append(lines, "verified delivery "+s.VerifiedEventID)
	}
	if s.Step == RotationDeciding {
		lines = append(lines, fmt.Sprintf("no verified delivery yet: decide with `siteops secret proceed --endpoint %s` or `siteops secret abort --endpoint %s`", s.OldEndpointID, s.OldEndpointID))
	}
	if s.Decision != "" {
		lines = append(lines, fmt.Sprintf("decision %s by %s", s.Decision, s.DecidedBy))
	}
	if s.Step == RotationDeciding && !s.DecisionDeadline.IsZero() {
		lines = append(lines, "aborts at "+s.DecisionDeadline.Format(time.RFC3339)+" unless decided")
	}
	switch {
	case s.OldSecretStored && !s.OldRetiresAt.IsZero():
		lines = append(lines, "old secret retires at "+s.OldRetiresAt.Format(time.RFC3339))
	case s.Step == RotationDone && !s.OldSecretStored:
		lines = append(lines, "old secret is not stored here (SITEOPS_WEBHOOK_SECRETS): it stays accepted until removed from there")
	case s.Step == RotationAborted || s.Step == RotationRolledBack:
		lines = append(lines, "old endpoint "+s.OldEndpointID+" and its secret stay as they were: deliveries signed with it are accepted, and nothing retires it")
	}
	if s.CleanUp != "" {
		lines = append(lines, "clean-up: "+s.CleanUp)
	}
	return lines
}

// Summary implements Status.
func (s *EndpointRegistrationStatus) Summary() []string {
	return []string{fmt.Sprintf("step %s  endpoint %s → %s (receiver %s)  fingerprint %s", s.Step, orNone(s.EndpointID), s.URL, webhook.ReceiverName(s.Receiver), orNone(s.Fingerprint))}
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
