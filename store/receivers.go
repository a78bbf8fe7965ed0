package store

import (
	"context"
	"database/sql"
	"time"

	"github.com/siteops/siteops/agentsite"
)

// Receivers is every receiver that has an active signing secret or an
// expected one, read at once: what an ingress needs to answer a delivery
// to any receiver path without a read of the store per request.
type Receivers struct {
	// Secrets holds, for each receiver with at least one active secret,
	// its secrets: the ones that decrypt with the store's key and the
	// ones that do not (ActiveSet.Unreadable).
	Secrets map[string]ActiveSet
	// Expectations holds, for each receiver with a mark (ExpectSecret),
	// whether a secret is expected now and when a mark last ended.
	Expectations map[string]Expectation
}

// Receivers reads the active secrets of every receiver and the expectations
// of every receiver: two SELECTs over small tables (one row per endpoint
// and per endpoint creation of the last hour), whatever the number of
// requests an ingress answers from them. The expectations are read first,
// so that a mark seen ended implies that the secret its creation stored
// (before it ended the mark) is seen too.
func (s *Store) Receivers(ctx context.Context) (Receivers, error) {
	if s.keys == nil {
		return Receivers{}, ErrNoSecretKey
	}
	r := Receivers{Secrets: map[string]ActiveSet{}, Expectations: map[string]Expectation{}}
	if err := s.eachExpectation(ctx, func(receiver string, until time.Time, ended sql.NullTime) {
		e := r.Expectations[receiver]
		e.add(until, ended, s.now().UTC())
		r.Expectations[receiver] = e
	}); err != nil {
		return Receivers{}, err
	}
	err := s.eachActive(ctx, "", nil, func(row secretRow) error {
		set := r.Secrets[row.Receiver]
		if plain, ok := s.open(row); ok {
			set.Infos = append(set.Infos, row.SecretInfo)
			set.Secrets = append(set.Secrets, agentsite.NewSigningSecret(plain))
		} else {
			set.Unreadable = append(set.Unreadable, row.SecretInfo)
		}
		r.Secrets[row.Receiver] = set
		return nil
	})
	if err != nil {
		return Receivers{}, err
	}
	return r, nil
}

// eachExpectation calls f for every mark of every receiver.
func (s *Store) eachExpectation(ctx context.Context, f func(receiver string, until time.Time, ended sql.NullTime)) error {
	rows, err := s.db.QueryContext(ctx, `SELECT receiver, until, ended_at FROM expected_secrets`)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var receiver string
		var until time.Time
		var ended sql.NullTime
		if err := rows.Scan(&receiver, &until, &ended); err != nil {
			return err
		}
		f(receiver, until, ended)
	}
	return rows.Err()
}

// add counts one mark into e, as SecretExpectation does.
func (e *Expectation) add(until time.Time, ended sql.NullTime, now time.Time) {
	switch {
	case ended.Valid && ended.Time.After(e.LastEnded):
		e.LastEnded = ended.Time
	case !ended.Valid && until.After(now):
		e.Pending = true
	}
}
