package demo

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/siteopstest"
)

// TestShortDemo runs the whole demo with few leads: the same run `make demo`
// shows, as part of `make test`.
func TestShortDemo(t *testing.T) {
	if _, err := devserver.FindCLI(); err != nil {
		siteopstest.Missing(t, siteopstest.RequireTemporal, "%v", err)
	}
	var out strings.Builder
	if err := Run(t.Context(), Options{Out: &out, Leads: 20, Dir: t.TempDir()}); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"onboarding/acme-anvils     site site_1 published",
		"onboarding/bayside-dental  site site_2 published",
		"leads synced              40 of 40",
		"embed incident            off → restored, 2 PATCHes",
		"secret rotation           we_1 → we_2",
		"0 rejected",
		"Temporal Web UI           http://127.0.0.1:",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the demo output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "whsec_") || strings.Contains(got, "@example.com") {
		t.Errorf("the demo printed a secret or a lead's personal data")
	}
}

// TestIngressSettingsAreTheBinarys holds the demo's ingress to the
// defaults `siteops ingress` runs with when no variable is set, but for
// its addresses: a new setting with a default must not start the demo at
// zero.
func TestIngressSettingsAreTheBinarys(t *testing.T) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "SITEOPS_") {
			t.Setenv(name, "") // restored after the test
			_ = os.Unsetenv(name)
		}
	}
	var want config.Ingress
	if err := config.Load(&want); err != nil {
		t.Fatal(err)
	}
	got := ingressSettings(8088, 9091)
	want.Addr, want.AdminAddr = got.Addr, got.AdminAddr
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the demo's ingress = %+v\nwant %+v (config's defaults on its own addresses)", got, want)
	}
}
