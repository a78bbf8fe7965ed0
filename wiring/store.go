package wiring

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/store"
)

// OpenStore opens and migrates the store that d names, with the key that
// encrypts signing secrets when SITEOPS_SECRET_KEY is set. With no
// SITEOPS_DATABASE_URL it is the per-user SQLite file, whose directory it
// creates. It returns the URL it opened (a password in it redacted), for
// the process to say where its state is.
func OpenStore(ctx context.Context, d config.Database, opts ...store.Option) (*store.Store, string, error) {
	url, err := d.ResolvedURL()
	if err != nil {
		return nil, "", err
	}
	key, err := d.Key()
	if err != nil {
		return nil, "", err
	}
	if key != nil {
		opts = append([]store.Option{store.WithSecretKey(key)}, opts...)
	}
	if path, ok := strings.CutPrefix(url, "sqlite://"); ok {
		path, _, _ = strings.Cut(path, "?")
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, "", fmt.Errorf("creating the directory of the store %s: %w; set SITEOPS_DATABASE_URL", path, err)
		}
	}
	st, err := store.Open(ctx, url, opts...)
	if err != nil {
		return nil, "", err
	}
	return st, store.Redact(url), nil
}
