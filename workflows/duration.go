package workflows

import "github.com/siteops/siteops/duration"

// Duration is a duration in workflow inputs: JSON "90s" or "10m", a bare
// number of seconds (package duration).
type Duration = duration.Duration
