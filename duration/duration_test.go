package duration

import (
	"encoding/json"
	"testing"
	"time"
)

func TestJSON(t *testing.T) {
	for in, want := range map[string]time.Duration{`"90s"`: 90 * time.Second, `"10m"`: 10 * time.Minute, `1.5`: 1500 * time.Millisecond, `0`: 0} {
		var d Duration
		if err := json.Unmarshal([]byte(in), &d); err != nil || d.D() != want {
			t.Errorf("%s = %s, %v; want %s", in, d, err, want)
		}
	}
	for _, bad := range []string{`"ninety"`, `true`, `"5 min"`} {
		var d Duration
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
	b, _ := json.Marshal(Duration(90 * time.Second))
	if string(b) != `"1m30s"` {
		t.Errorf("marshal = %s", b)
	}
}
