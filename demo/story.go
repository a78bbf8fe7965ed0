package demo

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/examples"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

// story is what the demo shows, step by step.
func (d *run) story(ctx context.Context) error {
	// 3. A webhook endpoint on the simulator, pointing at the ingress.
	d.stepf("registering a webhook endpoint that delivers every event type to the ingress")
	var events []string
	for _, t := range webhook.EventTypes() {
		events = append(events, string(t))
	}
	reg, err := d.starter.RegisterEndpoint(ctx, starter.EndpointRequest{URL: d.ingressURL + "/webhooks/demo", Events: events, Receiver: "demo", Operator: "demo-oncall"})
	if err != nil {
		return err
	}
	ep := reg.Status
	d.say("    endpoint %s → %s; its one-time secret is stored encrypted (fingerprint %s)\n", ep.EndpointID, ep.URL, ep.Fingerprint)

	// 4. Onboard the two sample sites.
	d.stepf("onboarding the two sample sites from examples/ (knowledge.ready arrives by webhook)")
	var sites []string
	for _, name := range examples.Specs {
		spec, err := starter.LoadSpecFS(examples.FS, name)
		if err != nil {
			return err
		}
		spec.KnowledgeTimeout = workflows.Duration(2 * time.Minute)
		p, problems := starter.Prepare(spec)
		if len(problems) > 0 {
			return fmt.Errorf("%s: %v", name, problems)
		}
		start := time.Now()
		o, err := d.starter.Onboard(ctx, p)
		if err != nil {
			return err
		}
		var res workflows.OnboardingResult
		if err := d.starter.Wait(ctx, o.Run, &res); err != nil {
			return err
		}
		sites = append(sites, res.SiteID)
		ready := "published without waiting for processing"
		if spec.WaitForKnowledge {
			ready = fmt.Sprintf("%d ready (knowledge.ready by webhook) before publishing", res.KnowledgeReady)
		}
		d.say("    %-26s site %s %s: %d knowledge sources %s, %d FAQs  %s\n", o.WorkflowID, res.SiteID, res.Status,
			len(res.KnowledgeIDs), ready, len(res.FAQIDs), time.Since(start).Round(time.Millisecond))
		d.facts = append(d.facts, fact{"onboarded " + spec.Site.Slug, fmt.Sprintf("%s %s, %d sources, %d FAQs", res.SiteID, res.Status, len(res.KnowledgeIDs), len(res.FAQIDs))})
	}

	// 4b. A third site, onboarded by another system through the Nexus service.
	if err := d.onboardThroughNexus(ctx); err != nil {
		return err
	}

	// 5. Visitor leads, each a lead.created webhook that wakes the lead sync.
	d.stepf("visitors leave %d leads on each site; lead.created webhooks wake each site's lead sync", d.o.Leads)
	start := time.Now()
	for _, s := range sites {
		if _, err := d.sim.CreateLeads(s, d.o.Leads); err != nil {
			return err
		}
	}
	if err := d.waitForLeads(ctx, sites); err != nil {
		return err
	}
	d.say("\n    %d leads synced into the store through the cursor API in %s\n", d.o.Leads*len(sites), time.Since(start).Round(time.Millisecond))
	d.facts = append(d.facts, fact{"leads synced", fmt.Sprintf("%d of %d, none duplicated", d.storedLeads(ctx, sites), d.o.Leads*len(sites))})

	// 6. The embed incident playbook.
	site := sites[0]
	d.stepf("incident on %s: embed off, then restored with corrected origins", site)
	off, err := d.starter.EmbedOff(ctx, site, "demo-oncall", "widget found on an unknown site")
	if err != nil {
		return err
	}
	d.say("    embed %s (%s), acknowledged by the API\n", off.Status.State, workflows.EmbedIncidentID(site))
	st, err := d.starter.EmbedOn(ctx, site, []string{"https://acme-anvils.example"}, "demo-oncall")
	if err != nil {
		return err
	}
	var keys []string
	for _, r := range d.sim.Requests() {
		if r.Method == http.MethodPatch && strings.Contains(r.Path, site) && strings.Contains(r.IdempotencyKey, "embed-") {
			keys = append(keys, r.IdempotencyKey)
		}
	}
	d.say("    embed %s; two PATCHes with two keys:\n      %s\n", st.State, strings.Join(keys, "\n      "))
	d.facts = append(d.facts, fact{"embed incident", fmt.Sprintf("off → %s, %d PATCHes, distinct keys", st.State, len(keys))})

	// 7. Rotate the signing secret while deliveries keep flowing.
	d.stepf("rotating the signing secret of %s while visitors keep leaving leads", ep.EndpointID)
	stop := make(chan struct{})
	var producer sync.WaitGroup
	produced := 0
	producer.Go(func() {
		// Until the rotation is over; 4,000 leads (about 100 s) at most.
		for produced < 4000 {
			select {
			case <-stop:
				return
			case <-time.After(25 * time.Millisecond):
				if _, err := d.sim.CreateLeads(sites[produced%len(sites)], 1); err == nil {
					produced++
				}
			}
		}
	})
	rot, err := d.starter.RotateSecret(ctx, starter.RotationRequest{OldEndpointID: ep.EndpointID, NewURL: d.ingressURL + "/webhooks/demo-v2", VerifyTimeout: 2 * time.Minute, GracePeriod: time.Hour, Operator: "demo-oncall"})
	if err != nil {
		close(stop)
		return err
	}
	var rs workflows.SecretRotationStatus
	// Deliveries flow the whole time, so a verified delivery comes within
	// seconds; the bound turns a stuck rotation into an error, not a hang.
	rotCtx, cancelRot := context.WithTimeout(ctx, 3*time.Minute)
	err = d.starter.Wait(rotCtx, rot, &rs)
	cancelRot()
	time.Sleep(300 * time.Millisecond) // let deliveries flow on the new endpoint alone
	close(stop)
	producer.Wait()
	if err != nil {
		return err
	}
	if err := d.waitForLeads(ctx, sites); err != nil {
		return err
	}
	d.say("\n    %s %s: new endpoint %s (fingerprint %s), verified by %s; old endpoint deleted\n", rot.GetID(), rs.Step, rs.NewEndpointID, rs.NewFingerprint, rs.VerifiedEventID)
	d.facts = append(d.facts, fact{"secret rotation", fmt.Sprintf("%s → %s, %d leads arrived during it, all synced", rs.OldEndpointID, rs.NewEndpointID, produced)})
	return nil
}

// waitForLeads shows the lead syncs catching up until the store holds every
// lead of every site.
func (d *run) waitForLeads(ctx context.Context, sites []string) error {
	want := 0
	for _, s := range sites {
		want += len(d.sim.LeadIDs(s))
	}
	last := -1
	err := d.waitFor(ctx, 2*time.Minute, "the lead syncs to catch up", func() bool {
		got := d.storedLeads(ctx, sites)
		if d.tty && got != last {
			d.say("\r    store %5d / %d leads  %s", got, want, bar(got, want))
		}
		last = got
		return got == want
	})
	if err == nil && !d.tty {
		d.say("    store %5d / %d leads  %s", last, want, bar(last, want))
	}
	return err
}

func (d *run) storedLeads(ctx context.Context, sites []string) int {
	n := 0
	for _, s := range sites {
		c, _ := d.store.CountLeads(ctx, s)
		n += c
	}
	return n
}

func bar(got, want int) string {
	const width = 30
	if want == 0 {
		return ""
	}
	filled := min(got*width/want, width)
	return "[" + strings.Repeat("#", filled) + strings.Repeat(".", width-filled) + "]"
}

// summary prints what happened.
func (d *run) summary() {
	m := d.metrics()
	d.facts = append(d.facts,
		fact{"webhook deliveries", fmt.Sprintf("%d accepted, %d duplicates, %d rejected", m["accepted"], m["duplicate"], m["rejected"])},
		fact{"relay", fmt.Sprintf("%d events dispatched, %d retried", m["dispatched"], m["retries"])},
		fact{"Temporal Web UI", d.temporal.UIAddress},
		fact{"took", time.Since(d.started).Round(100 * time.Millisecond).String()},
	)
	d.say("\nsummary\n")
	width := 0
	for _, f := range d.facts {
		width = max(width, len(f.what))
	}
	for _, f := range d.facts {
		d.say("  %-*s  %s\n", width, f.what, f.result)
	}
}

// metrics reads the ingress's own /metrics (on its admin address): deliveries by outcome, events
// dispatched and dispatches retried.
func (d *run) metrics() map[string]int {
	out := map[string]int{}
	req, _ := http.NewRequest(http.MethodGet, d.adminURL+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out
	}
	defer func() { _ = resp.Body.Close() }()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return out
	}
	for _, m := range mfs["siteops_webhook_deliveries_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "outcome" {
				out[l.GetValue()] += int(m.GetCounter().GetValue())
			}
		}
	}
	for _, m := range mfs["siteops_relay_dispatched_total"].GetMetric() {
		out["dispatched"] += int(m.GetCounter().GetValue())
	}
	for _, m := range mfs["siteops_relay_retries_total"].GetMetric() {
		out["retries"] += int(m.GetCounter().GetValue())
	}
	return out
}

func (d *run) get(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d", url, resp.StatusCode)
	}
	return nil
}
