package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

// TestOperatorHelpShowsOneDefault checks that every --operator names one
// default: where it comes from and what it is here, not pflag's second.
func TestOperatorHelpShowsOneDefault(t *testing.T) {
	t.Setenv("SITEOPS_OPERATOR", "alice")
	for _, path := range [][]string{{"embed", "off"}, {"embed", "on"}, {"embed", "close"}, {"secret", "rotate"}, {"secret", "abort"}, {"events", "replay"}} {
		out, err := runCLI(t, "", append(path, "--help")...)
		if err != nil {
			t.Fatal(err)
		}
		var line string
		for l := range strings.Lines(out) {
			if strings.Contains(l, "--operator") {
				line = l
			}
		}
		if strings.Count(line, "default") != 1 || !strings.Contains(line, `(default $SITEOPS_OPERATOR, else the login name: "alice")`) {
			t.Errorf("siteops %s --help: %q; want one default, naming $SITEOPS_OPERATOR and alice", strings.Join(path, " "), line)
		}
	}
}

// TestEmbedOffForASiteThatDoesNotExist checks what on-call reads when the
// API does not know the site: that it does not exist, exit 3, and with -o
// json the workflow and the API's answer; and that status says the
// incident never turned the embed off, not "turning-off".
func TestEmbedOffForASiteThatDoesNotExist(t *testing.T) {
	cause := starter.Failure{Message: "agentsite: PATCH /api/v1/sites/site_9/agent: 404 Not Found", Type: activities.ErrTypeNotFound, Status: 404, Code: "site_not_found", RequestID: "req_1"}
	err := &starter.SiteNotFoundError{SiteID: "site_9", Failed: &starter.WorkflowFailedError{WorkflowID: "embed-incident/site_9", Status: "Failed", Cause: cause}}
	want := "site site_9 does not exist (the Agent-Site API answered 404 site_not_found, request id req_1): nothing was turned off, and embed-incident/site_9 ended at once; check the site id"
	if err.Error() != want || exitCode(err) != exitNotFound {
		t.Errorf("%q (exit %d), want %q (exit %d)", err, exitCode(err), want, exitNotFound)
	}
	var b bytes.Buffer
	writeError(&b, err, exitCode(err), true)
	var e errorJSON
	if json.Unmarshal(b.Bytes(), &e) != nil || e.WorkflowID != "embed-incident/site_9" || e.Failure == nil || e.Failure.Code != "site_not_found" {
		t.Errorf("-o json: %s", b.String())
	}

	st := starter.Status{WorkflowID: "embed-incident/site_9", Type: workflows.EmbedIncidentWorkflowName, Status: "Failed", Failure: &cause,
		Detail: &workflows.EmbedIncidentStatus{SiteID: "site_9", State: workflows.IncidentTurningOff, Operator: "bob", Reason: "phishing"}}
	b.Reset()
	writeStatus(&b, st)
	if !strings.Contains(b.String(), "state never turned off: site site_9 does not exist;") || strings.Contains(b.String(), "turning-off") {
		t.Errorf("status of the incident:\n%s", b.String())
	}
}

// TestEmptyTimesOmittedFromJSON checks that -o json leaves out a time not
// set yet rather than printing 0001-01-01T00:00:00Z.
func TestEmptyTimesOmittedFromJSON(t *testing.T) {
	for _, v := range []any{
		workflows.EmbedIncidentStatus{SiteID: "site_1", State: workflows.IncidentTurningOff, OpenedAt: time.Now()},
		workflows.EmbedOffResult{Status: workflows.EmbedIncidentStatus{SiteID: "site_1", State: workflows.IncidentOff, OpenedAt: time.Now(), OffAt: time.Now()}},
		workflows.LeadSyncProgress{},
		workflows.SecretRotationStatus{Step: workflows.RotationVerifying},
	} {
		for _, output := range []string{"json", "jsonl"} {
			c := newCLI()
			root := c.root()
			c.output = output
			var b bytes.Buffer
			root.SetOut(&b)
			if err := c.show(root, v, nil); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(b.String(), "0001-01-01") {
				t.Errorf("-o %s of %T holds an empty time:\n%s", output, v, b.String())
			}
			if output == "jsonl" && strings.Count(b.String(), "\n") != 1 {
				t.Errorf("-o jsonl of %T is not one line:\n%s", v, b.String())
			}
		}
	}
}
