package ports

import (
	"net"
	"strconv"
	"testing"
)

func TestFreeNIsDistinctBindableAndBelowTheEphemeralRange(t *testing.T) {
	ps, err := FreeN(50)
	if err != nil {
		t.Fatal(err)
	}
	hi := high()
	seen := map[int]bool{}
	for _, p := range ps {
		if p < low || p >= hi || p >= smallintLimit {
			t.Errorf("port %d outside [%d, %d)", p, low, hi)
		}
		if seen[p] {
			t.Errorf("port %d returned twice", p)
		}
		seen[p] = true
	}
	p, err := Free()
	if err != nil {
		t.Fatal(err)
	}
	if seen[p] {
		t.Errorf("Free returned %d, which FreeN already gave out", p)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("port %d does not bind: %v", p, err)
	}
	_ = ln.Close()
}
