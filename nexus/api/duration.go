package api

import (
	"fmt"
	"strconv"
	"time"
)

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("90s", "10m"); a bare JSON number is read as seconds. It is the
// JSON form of every duration in siteops' inputs (package duration of
// siteops, which this package does not import so that callers need nothing
// of siteops; a test in package nexus keeps the two in step).
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String is the Go form, e.g. 1m30s.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(time.Duration(d).String())), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if s, err := strconv.Unquote(string(b)); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w (write e.g. \"90s\" or \"10m\")", s, err)
		}
		*d = Duration(v)
		return nil
	}
	secs, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("duration %s: write a string such as \"90s\" or a number of seconds", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}
