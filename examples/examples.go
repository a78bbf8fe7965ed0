// Package examples embeds the sample onboarding specs, so that `siteops
// demo` carries them wherever the binary goes.
package examples

import "embed"

// FS holds the specs and the knowledge files they refer to.
//
//go:embed *.yaml *.json knowledge
var FS embed.FS

// Specs are the sample specs, by file name.
var Specs = []string{"acme-anvils.yaml", "bayside-dental.json"}
