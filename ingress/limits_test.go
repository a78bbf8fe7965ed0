package ingress

import (
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/config"
)

// TestRefusalLimitsAreDocumented checks that every setting the refusals'
// log lines name is in the README's configuration table and in
// docs/webhooks.md's table of answers, beside the reason it refuses for.
func TestRefusalLimitsAreDocumented(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	answers := map[string]string{} // reason → its rows of the table of answers
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		if cells := strings.Split(line, "|"); len(cells) > 3 {
			for reason := range refusalLimits {
				if strings.Contains(cells[2], "`"+reason+"`") {
					answers[reason] += line
				}
			}
		}
	}
	for reason, l := range refusalLimits {
		row, ok := answers[reason]
		if !ok {
			t.Errorf("docs/webhooks.md's table of answers has no row for %s", reason)
		}
		for setting := range strings.SplitSeq(l.setting, ", ") {
			if setting == "" {
				continue
			}
			if !strings.Contains(string(readme), "| `"+setting+"` |") {
				t.Errorf("the README's configuration table has no row for %s (%s)", setting, reason)
			}
			if ok && !strings.Contains(row, "`"+setting+"`") {
				t.Errorf("docs/webhooks.md's row of %s does not name %s", reason, setting)
			}
		}
	}
}

// TestConnectionSettingsDefaults checks that the defaults of the
// connection cap's settings are the package's: the process reads the
// settings, and tests and ServerOptions' zero values the constants.
func TestConnectionSettingsDefaults(t *testing.T) {
	defaults := map[string]string{}
	typ := reflect.TypeFor[config.Ingress]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		defaults[f.Tag.Get("envconfig")] = f.Tag.Get("default")
	}
	if got, err := time.ParseDuration(defaults["SITEOPS_INGRESS_SHED_BUSY_AFTER"]); err != nil || got != DefaultShedBusyAfter {
		t.Errorf("SITEOPS_INGRESS_SHED_BUSY_AFTER defaults to %q (%v); want %s, DefaultShedBusyAfter", defaults["SITEOPS_INGRESS_SHED_BUSY_AFTER"], err, DefaultShedBusyAfter)
	}
	if got, err := strconv.Atoi(defaults["SITEOPS_INGRESS_MAX_CONNECTIONS"]); err != nil || got != DefaultMaxConns {
		t.Errorf("SITEOPS_INGRESS_MAX_CONNECTIONS defaults to %q (%v); want %d, DefaultMaxConns", defaults["SITEOPS_INGRESS_MAX_CONNECTIONS"], err, DefaultMaxConns)
	}
}
