package deploy_test

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var dashboardFile = filepath.Join("grafana", "siteops.json")

// dashboard is what the tests read of a Grafana dashboard (its JSON model).
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID          int        `json:"id"`
	Type        string     `json:"type"`
	Title       string     `json:"title"`
	Description string     `json:"description"`
	Datasource  datasource `json:"datasource"`
	Panels      []panel    `json:"panels"` // a collapsed row's
	Targets     []struct {
		RefID      string     `json:"refId"`
		Expr       string     `json:"expr"`
		Datasource datasource `json:"datasource"`
	} `json:"targets"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// readDashboard reads deploy/grafana/siteops.json and returns it with its
// panels other than rows, those of collapsed rows included.
func readDashboard(t *testing.T) (dashboard, []panel) {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal([]byte(read(t, dashboardFile)), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []panel
	for _, p := range d.Panels {
		if p.Type == "row" {
			out = append(out, p.Panels...)
			continue
		}
		out = append(out, p)
	}
	return d, out
}

// TestDashboard checks the Grafana dashboard offline: a dashboard of the
// JSON model with a Prometheus data source variable; every panel titled,
// described, and querying that variable's data source with queries that
// read only metrics siteops exports and series the rules record; every
// service level recorded is on a panel; the SDK's worker metrics, the
// relay's lanes and backlog and the rejected deliveries by reason are too.
func TestDashboard(t *testing.T) {
	d, panels := readDashboard(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion == 0 {
		t.Errorf("%s: uid %q, title %q, schemaVersion %d; want all set", dashboardFile, d.UID, d.Title, d.SchemaVersion)
	}
	variable := ""
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Query == "prometheus" {
			variable = "${" + v.Name + "}"
		}
	}
	if variable == "" {
		t.Fatalf("%s has no Prometheus data source variable; a dashboard imported elsewhere must ask for its data source", dashboardFile)
	}
	exported, rec, readme := exportedMetrics(t), recorded(t), read(t, "../docs/observability.md")+read(t, "../docs/webhooks.md")
	titles, ids := map[string]bool{}, map[int]bool{}
	var all strings.Builder
	for _, p := range panels {
		if p.Title == "" || p.Description == "" || len(p.Targets) == 0 {
			t.Errorf("%s: panel %d (%q) lacks a title, a description or a query", dashboardFile, p.ID, p.Title)
		}
		if titles[p.Title] || ids[p.ID] {
			t.Errorf("%s: two panels titled %q or numbered %d", dashboardFile, p.Title, p.ID)
		}
		titles[p.Title], ids[p.ID] = true, true
		if p.Datasource != (datasource{Type: "prometheus", UID: variable}) {
			t.Errorf("%s: panel %q has data source %+v; want the variable %s", dashboardFile, p.Title, p.Datasource, variable)
		}
		for _, q := range p.Targets {
			if q.Expr == "" || q.RefID == "" || q.Datasource != p.Datasource {
				t.Errorf("%s: panel %q has a query without expr or refId, or on another data source: %+v", dashboardFile, p.Title, q)
			}
			if strings.Contains(q.Expr, "$") {
				t.Errorf("%s: panel %q queries %q; a Grafana variable in a query keeps the end-to-end test from running it as is", dashboardFile, p.Title, q.Expr)
			}
			checkMetricsKnown(t, dashboardFile+": "+p.Title, q.Expr, exported, rec, readme)
			all.WriteString(q.Expr + "\n")
		}
	}
	queries := all.String()
	for name := range rec {
		if !strings.Contains(queries, name) {
			t.Errorf("%s shows no panel of the service level %s", dashboardFile, name)
		}
	}
	for _, want := range []string{
		"temporal_worker_task_slots_available", "temporal_workflow_task_queue_poll_succeed_total",
		"temporal_activity_schedule_to_start_latency_seconds_bucket", "temporal_workflow_task_schedule_to_start_latency_seconds_bucket",
		"siteops_relay_pending_events", `lane) (rate(siteops_relay_signal_delay_seconds_count`, `reason) (rate(siteops_webhook_deliveries_total{outcome="rejected"}`,
	} {
		if !strings.Contains(queries, want) {
			t.Errorf("%s has no panel that queries %s", dashboardFile, want)
		}
	}
}

// TestDashboardInREADME checks docs/observability.md's table of the dashboard: one
// row per panel, starting with its title (a dashboard row's title in
// bold), and no row of a panel that is not there.
func TestDashboardInREADME(t *testing.T) {
	d, panels := readDashboard(t)
	for _, p := range d.Panels {
		if p.Type == "row" {
			panels = append(panels, panel{Title: "**" + p.Title + "**"})
		}
	}
	readme := read(t, "../docs/observability.md")
	start := strings.Index(readme, "| Panel | What it answers |")
	if start < 0 {
		t.Fatal("docs/observability.md has no table of the dashboard's panels (| Panel | What it answers |)")
	}
	rows := map[string]bool{}
	row := regexp.MustCompile(`^\| ([^|]+?) \|`)
	for _, line := range strings.Split(readme[start:], "\n")[2:] {
		m := row.FindStringSubmatch(line)
		if m == nil {
			break
		}
		rows[m[1]] = true
	}
	for _, p := range panels {
		if !rows[p.Title] {
			t.Errorf("docs/observability.md's dashboard table has no row for the panel %q", p.Title)
		}
		delete(rows, p.Title)
	}
	for title := range rows {
		t.Errorf("docs/observability.md's dashboard table lists %q, which is no panel of %s", title, dashboardFile)
	}
}
