package api

import "github.com/siteops/siteops/duration"

// Duration reads and writes JSON as a Go duration string ("90s", "10m");
// a bare JSON number is read as seconds. It is siteops' one duration type
// (package duration, standard library only), as in the workflow inputs.
type Duration = duration.Duration
