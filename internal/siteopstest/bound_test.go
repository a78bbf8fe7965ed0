package siteopstest

import (
	"testing"
	"time"
)

func TestLoadFactor(t *testing.T) {
	for _, tc := range []struct {
		loadavg string
		cpus    int
		want    float64
	}{
		{"0.50 0.40 0.30 1/200 1234\n", 2, 1},
		{"4.00 3.00 2.00 5/200 1234\n", 2, 2},
		{"9.00 3.00 2.00 5/200 1234\n", 2, MaxLoadFactor},
		{"", 2, 1},
		{"x 1 1", 2, 1},
		{"4.00", 0, 1},
	} {
		if got := loadFactor(tc.loadavg, tc.cpus); got != tc.want {
			t.Errorf("loadFactor(%q, %d) = %v, want %v", tc.loadavg, tc.cpus, got, tc.want)
		}
	}
}

func TestBoundStretchesNeverShrinks(t *testing.T) {
	d := time.Second
	b := BoundRace(d, 5*d)
	least := d
	if Race {
		least = 5 * d
	}
	if b < least || b > time.Duration(float64(least)*MaxLoadFactor) {
		t.Errorf("BoundRace(1s, 5s) = %s; want from %s to %v times it (race %v)", b, least, MaxLoadFactor, Race)
	}
}
