package config

import (
	"strings"
	"testing"
	"time"
)

func TestLoadDefaultsAndErrors(t *testing.T) {
	for _, v := range []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "SITEOPS_TASK_QUEUE", "SITEOPS_DATABASE_URL", "SITEOPS_REPLAY_WINDOW", "SITEOPS_INGRESS_ADDR"} {
		t.Setenv(v, "")
	}
	var c struct {
		Temporal
		Database
		Ingress
	}
	// envconfig treats an empty variable as set; unset them for defaults.
	for _, v := range []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "SITEOPS_TASK_QUEUE", "SITEOPS_DATABASE_URL", "SITEOPS_REPLAY_WINDOW", "SITEOPS_INGRESS_ADDR"} {
		unset(t, v)
	}
	if err := Load(&c); err != nil {
		t.Fatal(err)
	}
	if c.Address != "localhost:7233" || c.Namespace != "default" || c.TaskQueue != "siteops" || c.URL != "sqlite://siteops.db" || c.ReplayWindow != 300*time.Second || c.Addr != ":8088" {
		t.Errorf("defaults = %+v", c)
	}
	t.Setenv("SITEOPS_REPLAY_WINDOW", "five minutes")
	err := Load(&c)
	if err == nil || !strings.Contains(err.Error(), "SITEOPS_REPLAY_WINDOW") {
		t.Errorf("a bad duration: %v", err)
	}
}

func TestValidate(t *testing.T) {
	if err := (Temporal{Address: "nohost", Namespace: "default", TaskQueue: "q"}).Validate(); err == nil || !strings.Contains(err.Error(), "TEMPORAL_ADDRESS") {
		t.Errorf("address: %v", err)
	}
	if err := (AgentSite{BaseURL: "https://x"}).Validate(); err == nil || !strings.Contains(err.Error(), "AGENTSITE_API_KEY") {
		t.Errorf("key: %v", err)
	}
	if err := (AgentSite{APIKey: "svc_live_secret"}).Validate(); err == nil || strings.Contains(err.Error(), "svc_live_secret") {
		t.Errorf("base URL: %v", err)
	}
	if _, err := (Database{SecretKey: "dG9vIHNob3J0"}).Key(); err == nil || !strings.Contains(err.Error(), "openssl rand -base64 32") {
		t.Errorf("short key: %v", err)
	}
	if k, err := (Database{SecretKey: "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}).Key(); err != nil || len(k) != 32 {
		t.Errorf("good key: %v", err)
	}
}
