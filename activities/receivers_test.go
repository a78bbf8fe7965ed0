package activities

import (
	"errors"
	"strings"
	"testing"
)

func TestReceiverPolicy(t *testing.T) {
	p, err := ParseReceiverPolicy(" https://hooks.example.com/webhooks/ , https://in.example.org:8443/siteops", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://hooks.example.com/webhooks", true},
		{"https://hooks.example.com/webhooks/v2", true},
		{"https://HOOKS.example.com:443/webhooks/v2", true},
		{"https://in.example.org:8443/siteops/webhooks/main", true},
		{"https://hooks.example.com/webhooksevil", false},
		{"https://hooks.example.com/other/webhooks/v2", false},
		{"https://hooks.example.com/webhooks/../admin", false},
		{"https://hooks.example.com/webhooks/%2e%2e/admin", false},
		{"https://hooks.example.com/webhooks/a%2Fb", false},
		{"http://hooks.example.com/webhooks/v2", false},
		{"https://hooks.example.com:8443/webhooks/v2", false},
		{"https://evil.example/webhooks/v2", false},
		{"https://hooks.example.com.evil.example/webhooks/v2", false},
		{"https://user:pw@hooks.example.com/webhooks/v2", false},
		{"https://hooks.example.com/webhooks/v2?x=1", false},
		{"https://hooks.example.com/webhooks/v2#x", false},
		{"http://127.0.0.1:8088/webhooks/v2", false},
		{"/webhooks/v2", false},
	} {
		err := p.Check(tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("Check(%q) = %v; want allowed %v", tc.url, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrOutsideDeployment) {
			t.Errorf("Check(%q) = %v; want ErrOutsideDeployment", tc.url, err)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("Check(%q) shows the password: %v", tc.url, err)
		}
	}
	none := ReceiverPolicy{}
	if err := none.Check("https://hooks.example.com/webhooks"); err == nil || !strings.Contains(err.Error(), "SITEOPS_PUBLIC_URL") {
		t.Errorf("with no public URL: %v; want a refusal naming SITEOPS_PUBLIC_URL", err)
	}
	test := ReceiverPolicy{AllowLoopback: true}
	if err := test.Check("http://127.0.0.1:8088/webhooks/v2"); err != nil {
		t.Errorf("loopback in test mode: %v", err)
	}
	if err := test.Check("https://evil.example/webhooks/v2"); err == nil {
		t.Error("test mode allowed a public host outside the deployment")
	}
	for _, bad := range []string{"hooks.example.com/webhooks", "ftp://x/y", "https://x/y?z=1", "https://u:p@x/y"} {
		if _, err := ParseReceiverPolicy(bad, false); err == nil || !strings.Contains(err.Error(), "SITEOPS_PUBLIC_URL") {
			t.Errorf("ParseReceiverPolicy(%q) = %v; want an error naming SITEOPS_PUBLIC_URL", bad, err)
		}
	}
}
