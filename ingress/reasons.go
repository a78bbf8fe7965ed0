package ingress

import "slices"

// refusalReasons are the reasons the handler refuses a request for: the
// reason label of siteops_webhook_deliveries_total and
// siteops_webhook_refusals_total, the reason column of the record of
// refused deliveries, and what `siteops events list --refused --reason`
// accepts. The handler names them where it refuses (reject, refuse,
// slotRefused); TestRefusalReasonsAreListed fails when it names one this
// list lacks.
var refusalReasons = []string{
	"malformed_signature_header",
	"timestamp_outside_window",
	"invalid_signature",
	"unknown_receiver",
	"secret_unreadable",
	"unreadable_body",
	"body_too_large",
	"body_too_slow",
	"body_not_allowed",
	"busy",
	"body_budget",
	"connection_shed",
	"store_unavailable",
}

// ownFailures are the reasons that are siteops' failures rather than the
// sender's: a delivery refused for one of them might have been correctly
// signed. The delivery error budget counts them
// (deploy/prometheus/siteops-recording.yaml), and the alert on a
// receiver's refusals leaves them to it (siteops-alerts.yaml); a test
// holds both files to this list.
var ownFailures = []string{"busy", "body_budget", "connection_shed", "store_unavailable", "secret_unreadable"}

// RefusalReasons lists the reasons a delivery may be refused for.
func RefusalReasons() []string { return slices.Clone(refusalReasons) }
