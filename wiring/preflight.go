package wiring

import (
	"fmt"
	"log/slog"

	"github.com/siteops/siteops/doctor"
)

// Preflight says what a process does with the checks of package doctor at
// start.
type Preflight struct {
	// Skip starts the process although a check failed, logging each
	// failure loudly.
	Skip bool
}

// PreflightError is a check that stopped a process from starting.
type PreflightError struct {
	Process string
	Result  doctor.Result
}

func (e *PreflightError) Error() string {
	return fmt.Sprintf("the %s does not start: %s check failed: %s (fix it, or start with --skip-checks)", e.Process, e.Result.Check, e.Result.Detail)
}

func (e *PreflightError) Unwrap() error { return e.Result.Err }

// judge logs every result and returns the first failure as an error, unless
// p.Skip.
func (p Preflight) judge(process string, logger *slog.Logger, results ...doctor.Result) error {
	for _, r := range results {
		switch r.Status {
		case doctor.OK:
			logger.Info("check passed", "check", r.Check, "detail", r.Detail)
		case doctor.Warn:
			logger.Warn("check warns", "check", r.Check, "detail", r.Detail)
		case doctor.Skip:
			logger.Info("check skipped", "check", r.Check, "detail", r.Detail)
		case doctor.Fail:
			if p.Skip {
				logger.Error("CHECK FAILED; starting anyway (--skip-checks)", "check", r.Check, "detail", r.Detail)
			}
		}
	}
	if f, failed := doctor.Failed(results); failed && !p.Skip {
		return &PreflightError{Process: process, Result: f}
	}
	return nil
}
