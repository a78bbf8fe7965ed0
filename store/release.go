package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/siteops/siteops/release"
)

// The store changes in two halves across releases (expand then contract).
// A release's migrations, applied when its worker or ingress starts, only
// add: tables, nullable columns or columns with a constant default,
// indexes, backfills (migrations_test.go refuses anything else). What the
// release before it cannot read (re-sealing secrets in a new format,
// dropping or renaming) waits for its contract steps, which run only in
// Finalize, once no process of the older release remains; Finalize records
// the release, and from then on a binary of an older release refuses the
// store.

// ErrFinalizedLater is returned by Open when the store was finalized for
// a release later than this binary's.
var ErrFinalizedLater = errors.New("store: finalized for a later release")

// finalizedLaterError names the releases.
type finalizedLaterError struct{ finalized int }

func (e finalizedLaterError) Error() string {
	return fmt.Sprintf("store: the store was finalized for release %d (`siteops release finalize`), after which a binary of an earlier release may no longer use it; this binary is release %d: deploy release %d or later",
		e.finalized, release.Number, e.finalized)
}

func (e finalizedLaterError) Is(target error) bool { return target == ErrFinalizedLater }

// checkFinalized refuses a store finalized for a later release. A store
// without the releases table (new, or older than the table) finalized
// nothing.
func (s *Store) checkFinalized(ctx context.Context) error {
	f, err := s.FinalizedRelease(ctx)
	if err != nil {
		return err
	}
	if f > release.Number {
		return finalizedLaterError{f}
	}
	return nil
}

// FinalizedRelease is the latest release finalized on the store (0: none).
func (s *Store) FinalizedRelease(ctx context.Context) (int, error) {
	exists, err := s.hasTable(ctx, "siteops_releases")
	if err != nil || !exists {
		return 0, err
	}
	var n sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT max(release_number) FROM siteops_releases`).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: reading the finalized release: %w", err)
	}
	return int(n.Int64), nil
}

// hasTable reports whether the store has a table, without creating
// anything.
func (s *Store) hasTable(ctx context.Context, name string) (bool, error) {
	q := `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = $1`
	if s.dialect == Postgres {
		q = `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = $1`
	}
	var n int
	if err := s.db.QueryRowContext(ctx, q, name).Scan(&n); err != nil {
		return false, fmt.Errorf("store: looking for table %s: %w", name, err)
	}
	return n > 0, nil
}

// The process registry's timing: a process says it runs every
// ProcessHeartbeat, counts as stopped ProcessGone after its last word, and
// its row is forgotten ProcessForgotten then (it was killed, or its host
// lost).
const (
	ProcessHeartbeat = 30 * time.Second
	ProcessGone      = 3*ProcessHeartbeat + 10*time.Second
	ProcessForgotten = 7 * 24 * time.Hour
)

// Process is one worker or ingress as the registry knows it.
type Process struct {
	ID        string    `json:"id"`
	Role      string    `json:"role"`
	Release   int       `json:"release"`
	BuildID   string    `json:"build_id,omitempty"`
	Host      string    `json:"host,omitempty"`
	StartedAt time.Time `json:"started_at"`
	SeenAt    time.Time `json:"seen_at"`
	// MaxConns is the size of its pool of database connections; 0 for a
	// process of a release before it was recorded.
	MaxConns int `json:"max_conns,omitempty"`
}

// Heartbeat records p as running now (its first call registers it).
func (s *Store) Heartbeat(ctx context.Context, p Process) error {
	now := s.now().UTC()
	_, err := s.db.ExecContext(ctx, `INSERT INTO siteops_processes (id, role, release_number, build_id, host, started_at, seen_at, max_conns)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at`,
		p.ID, p.Role, p.Release, p.BuildID, p.Host, p.StartedAt.UTC(), now, p.MaxConns)
	if err != nil {
		return fmt.Errorf("store: recording process %s in the registry: %w", p.ID, err)
	}
	return nil
}

// Deregister removes a stopping process from the registry.
func (s *Store) Deregister(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM siteops_processes WHERE id = $1`, id)
	return err
}

// ForgetProcesses removes the processes not seen since before: they
// stopped without saying so (killed, their host lost).
func (s *Store) ForgetProcesses(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM siteops_processes WHERE seen_at < $1`, before.UTC())
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Processes lists the processes seen since since, oldest release first.
func (s *Store) Processes(ctx context.Context, since time.Time) ([]Process, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, role, release_number, build_id, host, started_at, seen_at, max_conns
		FROM siteops_processes WHERE seen_at >= $1 ORDER BY release_number, role, build_id, id`, since.UTC())
	if err != nil {
		return nil, fmt.Errorf("store: reading the process registry: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []Process
	for rows.Next() {
		var p Process
		if err := rows.Scan(&p.ID, &p.Role, &p.Release, &p.BuildID, &p.Host, &p.StartedAt, &p.SeenAt, &p.MaxConns); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// ContractPlan is what this release's contract steps would change.
type ContractPlan struct {
	// LegacySecrets counts the stored secrets in the first format (the
	// raw key, bound to the endpoint id only; key_id ''), active or
	// retired: the steps re-seal them in the current format. The next
	// release refuses the first format.
	LegacySecrets int `json:"legacy_secrets"`
	// LegacyActive counts the active ones among them.
	LegacyActive int `json:"legacy_active"`
	// UnusedTexts counts the knowledge texts without used_at (the release
	// before this one never wrote it): the steps set it to the time of
	// finalizing, so that the purge counts their retention from then.
	UnusedTexts int `json:"texts_without_used_at"`
}

// Plan counts what Finalize would change.
func (s *Store) Plan(ctx context.Context) (ContractPlan, error) {
	var p ContractPlan
	now := s.now().UTC()
	err := s.db.QueryRowContext(ctx, `SELECT count(*),
		coalesce(sum(CASE WHEN (retired_at IS NULL OR retired_at > $1) AND (retire_after IS NULL OR retire_after > $1) THEN 1 ELSE 0 END), 0)
		FROM webhook_secrets WHERE key_id = ''`, now).Scan(&p.LegacySecrets, &p.LegacyActive)
	if err != nil {
		return p, fmt.Errorf("store: counting secrets in the first format: %w", err)
	}
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM knowledge_texts WHERE used_at IS NULL`).Scan(&p.UnusedTexts); err != nil {
		return p, fmt.Errorf("store: counting knowledge texts without used_at: %w", err)
	}
	return p, nil
}

// ContractResult is what Finalize changed.
type ContractResult struct {
	Release int `json:"release"`
	// Resealed counts the secrets brought from the first format to the
	// current one.
	Resealed int `json:"resealed_secrets"`
	// UnreadableRetired counts retired secrets in the first format that
	// do not decrypt with the key: they stay as they are (they are
	// refused anyway).
	UnreadableRetired int `json:"unreadable_retired_secrets"`
	// TextsDated counts the knowledge texts given a used_at.
	TextsDated int64 `json:"texts_dated"`
	// AlreadyFinalized says the release was finalized before: nothing ran.
	AlreadyFinalized bool `json:"already_finalized"`
}

// ErrLegacyUnreadable is returned by Finalize when active secrets in the
// first format do not decrypt with the store's key: the next release
// could not read them at all.
var ErrLegacyUnreadable = errors.New("store: active secrets in the first format do not decrypt with SITEOPS_SECRET_KEY")

// Finalize runs the contract steps of this binary's release and records it
// as finalized by by: it re-seals every stored secret still in the first
// format (issue 20: the first format is read by this release only, and
// refused by the next), and dates the knowledge texts the previous release
// stored without used_at. Every step may run again; the release is
// recorded last, so a failure leaves it unfinalized. Run it only once no
// process of an older release uses the store (`siteops release finalize`
// checks what it can): the previous release read and wrote what the steps
// change.
func (s *Store) Finalize(ctx context.Context, by string) (ContractResult, error) {
	res := ContractResult{Release: release.Number}
	f, err := s.FinalizedRelease(ctx)
	if err != nil {
		return res, err
	}
	if f >= release.Number {
		res.AlreadyFinalized = true
		return res, nil
	}
	plan, err := s.Plan(ctx)
	if err != nil {
		return res, err
	}
	if plan.LegacySecrets > 0 {
		if s.keys == nil {
			return res, fmt.Errorf("%w; %d of them are in the first format and must be re-sealed before the next release, which refuses that format", s.NoKeyError(ctx), plan.LegacySecrets)
		}
		// Writers of sealed data read first: every secret the steps
		// would re-seal is opened before any is written, and an active
		// one that does not open stops them with nothing written.
		left, err := s.legacyUnopened(ctx)
		if err != nil {
			return res, err
		}
		var active []string
		for _, r := range left {
			if r.Retired(s.now()) {
				res.UnreadableRetired++
			} else {
				active = append(active, r.EndpointID)
			}
		}
		if len(active) > 0 {
			return res, fmt.Errorf("%w (endpoints %s): they were stored under another key than SITEOPS_SECRET_KEY (key %s); nothing was changed; run `siteops secret rekey` with that key as SITEOPS_OLD_SECRET_KEY, then finalize again", ErrLegacyUnreadable, strings.Join(active, ", "), s.keys.id)
		}
		if res.Resealed, err = s.Rekey(ctx, nil); err != nil {
			return res, fmt.Errorf("store: re-sealing secrets in the first format: %w", err)
		}
	}
	now := s.now().UTC()
	r, err := s.db.ExecContext(ctx, `UPDATE knowledge_texts SET used_at = $1 WHERE used_at IS NULL`, now)
	if err != nil {
		return res, fmt.Errorf("store: dating knowledge texts: %w", err)
	}
	res.TextsDated, _ = r.RowsAffected()
	if _, err := s.db.ExecContext(ctx, `INSERT INTO siteops_releases (release_number, finalized_at, finalized_by) VALUES ($1, $2, $3)
		ON CONFLICT (release_number) DO NOTHING`, release.Number, now, by); err != nil {
		return res, fmt.Errorf("store: recording release %d as finalized: %w", release.Number, err)
	}
	return res, nil
}

// legacyUnopened describes the secrets in the first format that do not
// open with the store's key, which Rekey(nil) leaves as they are.
func (s *Store) legacyUnopened(ctx context.Context) ([]SecretInfo, error) {
	return s.secretInfosKept(ctx, func(r secretRow) bool { _, ok := s.open(r); return !ok },
		`SELECT `+secretColumns+` FROM webhook_secrets WHERE key_id = '' ORDER BY created_at, endpoint_id`)
}
