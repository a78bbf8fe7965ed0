package store

import "context"

// MigrateTo moves the schema of s up or down to version, for tests of a
// migration.
func MigrateTo(ctx context.Context, s *Store, version int64) error {
	p, err := s.migrations()
	if err != nil {
		return err
	}
	cur, err := p.GetDBVersion(ctx)
	if err != nil {
		return err
	}
	if version < cur {
		_, err = p.DownTo(ctx, version)
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}
