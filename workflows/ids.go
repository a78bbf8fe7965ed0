package workflows

import "strings"

// Key derives the idempotency key of one logical step of a workflow run:
// the workflow ID, a run discriminator where an ID is reused for new
// operations, and the step. The same step of the same run always has the
// same key, so activity retries reuse it.
func Key(parts ...string) string { return strings.Join(parts, "/") }
