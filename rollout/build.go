package rollout

import "github.com/siteops/siteops/release"

// Build is this binary as `siteops version` tells it: its version, its
// release, and the build id a versioned worker would poll as, or why it
// would refuse to start. The fields are in the order of the keys of the
// JSON object it has always been.
type Build struct {
	BuildID       string `json:"build_id,omitempty"`
	BuildIDError  string `json:"build_id_error,omitempty"`
	BuildIDSource string `json:"build_id_source,omitempty"`
	Release       int    `json:"release"`
	Version       string `json:"version"`
}

// ThisBuild is this binary of version, with the build id configured
// (SITEOPS_BUILD_ID, "" for none) or derived (release.BuildID).
func ThisBuild(version, configured string) Build {
	b := Build{Version: version, Release: release.Number}
	id, source, err := release.BuildID(configured)
	if err != nil {
		b.BuildIDError = err.Error()
	} else {
		b.BuildID, b.BuildIDSource = id, source
	}
	return b
}
