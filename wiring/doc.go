// Package wiring turns siteops' settings (package config) into the parts a
// process runs on: the store, the Agent-Site client with its shared rate
// limit, and the Temporal client, read as the Temporal ecosystem reads its
// connection settings. The worker, the ingress, the CLI and the demo all
// assemble themselves here, so that what one of them proves holds for the
// others. The functions whose names end in FromEnv, and Diagnose, Probe
// and PatientStarter, read settings from the environment themselves: they
// serve the CLI's commands, which take no flags for those settings.
//
// It holds no business rules and starts no goroutines of its own beyond
// what the parts it builds need.
package wiring
