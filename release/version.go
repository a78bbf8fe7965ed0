package release

import "runtime/debug"

// Version is this binary's version as `siteops version` prints it: linked
// (the version set at link time) or else the main module's version from
// the build info (a tagged version when installed with go install,
// "(devel)" in a checkout), with the VCS revision when known and the Go
// version.
func Version(linked string) string {
	b, ok := readBuild()
	v := linked
	if v == "" {
		v = b.version
	}
	if v == "" {
		v = "(devel)"
	}
	if ok {
		if b.revision != "" {
			v += " " + b.revision
		}
		v += " " + b.goVersion
	}
	return v
}

// build is what the go command recorded of this binary.
type build struct {
	version   string // the main module's
	goVersion string
	revision  string // the VCS revision's first 12 hex digits, when recorded
	dirty     bool   // the tree was modified
}

// readBuild reads what the go command recorded of this binary, the one
// place that does; ok is false when it recorded nothing.
func readBuild() (build, bool) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return build{}, false
	}
	b := build{version: info.Main.Version, goVersion: info.GoVersion}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			if len(s.Value) >= 12 {
				b.revision = s.Value[:12]
			}
		case "vcs.modified":
			b.dirty = s.Value == "true"
		}
	}
	return b, true
}

// vcsRevision is the VCS revision the go command recorded (12 hex digits)
// and whether the tree was modified.
func vcsRevision() (rev string, dirty bool) {
	b, _ := readBuild()
	return b.revision, b.dirty
}
