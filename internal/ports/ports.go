// Package ports picks TCP ports for the local servers that tests and the demo
// start (Temporal dev server, Temporal cluster, simulator, ingress).
//
// A port handed out by the kernel (listen on :0) lies in the ephemeral range,
// the same range outgoing connections take their local ports from: between
// the moment it is picked and the moment a server binds it, any client
// connection on the machine may take it. Temporal also stores membership
// ports in a PostgreSQL smallint, so they must stay below 32768. Free
// therefore picks at random from [10000, min(start of the ephemeral range,
// 32768)) and checks that the port can be bound on 127.0.0.1. It does not
// reserve the port: two processes may still race for one, rarely.
package ports

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

const (
	// low is the first port Free considers: below it live well-known and
	// registered services that a test machine may run.
	low = 10000
	// smallintLimit bounds every port: Temporal keeps membership ports in a
	// PostgreSQL smallint.
	smallintLimit = 32768
	// attempts bounds the random probes before Free gives up.
	attempts = 200
)

var (
	mu sync.Mutex
	// given remembers the ports this process handed out, so that two calls
	// never return the same port even before anything binds it.
	given = map[int]bool{}
)

// Free returns a TCP port that was free on 127.0.0.1 a moment ago, outside
// the kernel's ephemeral range and below 32768, and never one this process
// returned before.
func Free() (int, error) {
	ps, err := FreeN(1)
	if err != nil {
		return 0, err
	}
	return ps[0], nil
}

// FreeN returns n distinct ports with the guarantees of Free.
func FreeN(n int) ([]int, error) {
	hi := high()
	if hi-low < 100 {
		return nil, fmt.Errorf("ports: no room below the ephemeral port range (it starts at %d); raise its start in /proc/sys/net/ipv4/ip_local_port_range above %d", hi, low+100)
	}
	mu.Lock()
	defer mu.Unlock()
	out := make([]int, 0, n)
	for range n {
		p, err := pick(hi)
		if err != nil {
			return nil, err
		}
		given[p] = true
		out = append(out, p)
	}
	return out, nil
}

// pick probes random ports in [low, hi) until one binds.
func pick(hi int) (int, error) {
	for range attempts {
		p := low + rand.IntN(hi-low) //nolint:gosec // spreading picks, not a secret
		if given[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		_ = ln.Close()
		return p, nil
	}
	return 0, fmt.Errorf("ports: no free port found in [%d, %d) after %d attempts; are that many ports in use?", low, hi, attempts)
}

// high is the exclusive upper bound of the ports Free picks from.
func high() int {
	hi := smallintLimit
	if start, err := ephemeralStart(); err == nil && start < hi {
		hi = start
	}
	return hi
}

// ephemeralStart reads the first port of Linux's ephemeral range. Elsewhere
// the file does not exist and the caller keeps its bound of 32768, which is
// below the IANA ephemeral range (49152-65535) the other systems use.
func ephemeralStart() (int, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, errors.New("ports: unexpected ip_local_port_range format")
	}
	return strconv.Atoi(f[0])
}
