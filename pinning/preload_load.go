package pinning

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
)

// preloadSuffixes are the archive names loaded from the preload directory (the engine
// detects the compression itself).
var preloadSuffixes = []string{".tar", ".tar.gz", ".tgz", ".tar.xz", ".tar.zst", ".tar.bz2"}

// preloadTimeout bounds the load of one tarball.
const preloadTimeout = 30 * time.Minute

// imageLoader is what preloading needs from the engine (a part of Engine).
type imageLoader interface {
	LoadImages(ctx context.Context, archive io.Reader) ([]string, error)
}

// preloadImages loads every image archive in dir, in name order, and returns what each
// loaded. A tarball that fails to load does not keep the runtime from starting; it
// keeps pinning what it holds (its manifest, when readable; else pinning falls back to
// what it loaded at an earlier start). A missing directory preloads nothing.
func preloadImages(engine imageLoader, dir string, log logrus.FieldLogger) []Preloaded {
	entries, err := os.ReadDir(dir)
	if err != nil {
		log.WithError(err).Warn("preload: cannot read the preload directory; nothing preloaded")
		return nil
	}
	var out []Preloaded
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !slices.ContainsFunc(preloadSuffixes, func(s string) bool { return strings.HasSuffix(name, s) }) {
			continue
		}
		start := time.Now()
		refs, err := loadArchive(engine, filepath.Join(dir, name))
		entry := log.WithField("tarball", name).WithField("duration", time.Since(start).Round(time.Millisecond))
		if err != nil {
			failed := Preloaded{Tarball: name, Failed: err.Error()}
			held, merr := archiveRefs(filepath.Join(dir, name))
			if merr != nil {
				entry.WithError(err).WithField("manifest_error", merr.Error()).
					Error("preload: tarball not loaded and not readable; its pins are those of its last good load")
			} else {
				failed.Refs, failed.Origin = held, OriginManifest
				entry.WithError(err).WithField("images", held).
					Error("preload: tarball not loaded; the images its manifest names stay pinned")
			}
			out = append(out, failed)
			continue
		}
		entry.WithField("images", refs).Info("preload: loaded and pinned")
		out = append(out, Preloaded{Tarball: name, Refs: refs, Origin: OriginLoaded})
	}
	return out
}

func loadArchive(engine imageLoader, path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), preloadTimeout)
	defer cancel()
	refs, err := engine.LoadImages(ctx, f)
	if err != nil {
		return nil, err
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("the engine loaded no image from %s", filepath.Base(path))
	}
	return refs, nil
}
