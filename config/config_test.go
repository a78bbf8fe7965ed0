package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
)

func TestLoadDefaultsAndErrors(t *testing.T) {
	vars := []string{"SITEOPS_TASK_QUEUE", "SITEOPS_DATABASE_URL", "SITEOPS_REPLAY_WINDOW", "SITEOPS_INGRESS_ADDR", "SITEOPS_API_RATE_LIMIT", "SITEOPS_LOG_FORMAT", "SITEOPS_LOG_LEVEL"}
	// envconfig treats an empty variable as set; unset them for defaults.
	for _, v := range vars {
		t.Setenv(v, "")
		unset(t, v)
	}
	var c struct {
		Temporal
		Database
		Ingress
		AgentSite
		Log
	}
	if err := Load(&c); err != nil {
		t.Fatal(err)
	}
	if c.TaskQueue != "siteops" || c.URL != "" || c.ReplayWindow != 300*time.Second || c.Addr != ":8088" || c.RateLimit != 0 || c.Format != "text" || c.Level != "info" {
		t.Errorf("defaults = %+v", c)
	}
	t.Setenv("SITEOPS_REPLAY_WINDOW", "five minutes")
	err := Load(&c)
	if err == nil || !strings.Contains(err.Error(), "SITEOPS_REPLAY_WINDOW") {
		t.Errorf("a bad duration: %v", err)
	}
}

func TestValidate(t *testing.T) {
	if err := (Temporal{}).Validate(); err == nil || !strings.Contains(err.Error(), "SITEOPS_TASK_QUEUE") {
		t.Errorf("task queue: %v", err)
	}
	if err := (AgentSite{BaseURL: "https://x"}).Validate(); err == nil || !strings.Contains(err.Error(), "AGENTSITE_API_KEY") {
		t.Errorf("key: %v", err)
	}
	if err := (AgentSite{APIKey: "svc_live_secret"}).Validate(); err == nil || strings.Contains(err.Error(), "svc_live_secret") {
		t.Errorf("base URL: %v", err)
	}
	if err := (AgentSite{BaseURL: "https://x", APIKey: "k", RateLimit: -1}).Validate(); err == nil || !strings.Contains(err.Error(), "SITEOPS_API_RATE_LIMIT") {
		t.Errorf("rate limit: %v", err)
	}
	if _, err := (Database{SecretKey: "dG9vIHNob3J0"}).Key(); err == nil || !strings.Contains(err.Error(), "openssl rand -base64 32") {
		t.Errorf("short key: %v", err)
	}
	if k, err := (Database{SecretKey: "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}).Key(); err != nil || len(k) != 32 {
		t.Errorf("good key: %v", err)
	}
	if err := (Log{Format: "xml", Level: "info"}).Validate(); err == nil || !strings.Contains(err.Error(), "SITEOPS_LOG_FORMAT") {
		t.Errorf("log format: %v", err)
	}
	if err := (Log{Format: "json", Level: "loud"}).Validate(); err == nil || !strings.Contains(err.Error(), "SITEOPS_LOG_LEVEL") {
		t.Errorf("log level: %v", err)
	}
}

// TestDefaultStoreIsOnePlacePerUser checks that without
// SITEOPS_DATABASE_URL every command finds the same SQLite file wherever
// it runs, and that a relative sqlite:// path is made absolute.
func TestDefaultStoreIsOnePlacePerUser(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	got, err := Database{}.ResolvedURL()
	if want := "sqlite://" + filepath.Join(state, "siteops", "siteops.db"); err != nil || got != want {
		t.Errorf("default = %q, %v; want %q", got, err, want)
	}
	t.Chdir(t.TempDir())
	wd, _ := os.Getwd()
	got, err = Database{URL: "sqlite://local.db?_pragma=x"}.ResolvedURL()
	if want := "sqlite://" + filepath.Join(wd, "local.db") + "?_pragma=x"; err != nil || got != want {
		t.Errorf("relative = %q, %v; want %q", got, err, want)
	}
	if got, _ := (Database{URL: "postgres://db/x"}).ResolvedURL(); got != "postgres://db/x" {
		t.Errorf("postgres = %q", got)
	}
}

func TestLoggerFormats(t *testing.T) {
	var b bytes.Buffer
	l, err := Log{Format: "json", Level: "warn"}.Logger(&b)
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hidden")
	l.Warn("shown", "event_id", "evt_1")
	if strings.Contains(b.String(), "hidden") || !strings.Contains(b.String(), `"event_id":"evt_1"`) {
		t.Errorf("json log = %s", b.String())
	}
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"WorkflowID": "workflow_id", "RunID": "run_id", "TaskQueue": "task_queue", "ActivityType": "activity_type",
		"Attempt": "attempt", "TraceID": "trace_id", "event_id": "event_id", "msg": "msg", "HTTPStatus": "http_status",
	} {
		if got := SnakeCase(in); got != want {
			t.Errorf("SnakeCase(%q) = %q, want %q", in, got, want)
		}
	}
	var b bytes.Buffer
	l, _ := Log{Format: "text", Level: "info"}.Logger(&b)
	l.Info("x", "WorkflowID", "onboarding/x")
	if !strings.Contains(b.String(), "workflow_id=onboarding/x") {
		t.Errorf("log = %s", b.String())
	}
}

// The default of SITEOPS_API_HEADROOM is the limiter's own, which the
// demo and the tests' workers set without the environment.
func TestAPIHeadroomDefaultIsTheLimiters(t *testing.T) {
	t.Setenv("SITEOPS_API_HEADROOM", "")
	if err := os.Unsetenv("SITEOPS_API_HEADROOM"); err != nil {
		t.Fatal(err)
	}
	var a AgentSite
	if err := Load(&a); err != nil {
		t.Fatal(err)
	}
	if a.Headroom != agentsite.DefaultHeadroom {
		t.Errorf("SITEOPS_API_HEADROOM defaults to %g, the limiter to %g", a.Headroom, agentsite.DefaultHeadroom)
	}
}
