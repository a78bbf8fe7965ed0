package starter

import "testing"

func TestReceiverFromURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://hooks.example.com/webhooks":            "",
		"https://hooks.example.com/webhooks/":           "",
		"https://hooks.example.com/webhooks/v2":         "v2",
		"https://hooks.example.com/siteops/webhooks/v3": "v3",
		"http://127.0.0.1:8088/webhooks/rot-1":          "rot-1",
	} {
		got, err := ReceiverFromURL(raw)
		if err != nil || got != want {
			t.Errorf("ReceiverFromURL(%s) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, raw := range []string{"https://hooks.example.com/", "https://hooks.example.com/in", "https://hooks.example.com/webhooks/v2/extra"} {
		if _, err := ReceiverFromURL(raw); err == nil {
			t.Errorf("ReceiverFromURL(%s) succeeded", raw)
		}
	}
}
