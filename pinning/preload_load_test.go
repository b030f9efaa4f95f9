package pinning

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/dockpin/cri-dockerd/logctx"
)

func TestPreloadImages(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		assert.NilError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write("a.tar", "archive-a")
	write("b.tar.gz", "archive-b")
	write("broken.tar", "not an archive")
	write("notes.txt", "archive-a") // not an archive name: ignored
	assert.NilError(t, os.Mkdir(filepath.Join(dir, "sub.tar"), 0o755))

	fake := newFakeEngine()
	fake.archives["archive-a"] = []string{"a:1", "a:2"}
	fake.archives["archive-b"] = []string{"sha256:b"} // untagged: the engine names its ID
	log := logctx.Discard()

	got := preloadImages(fake, dir, log)
	assert.Equal(t, len(got), 3)
	assert.DeepEqual(t, got[:2], []Preloaded{
		{Tarball: "a.tar", Refs: []string{"a:1", "a:2"}, Origin: OriginLoaded},
		{Tarball: "b.tar.gz", Refs: []string{"sha256:b"}, Origin: OriginLoaded},
	})
	assert.Equal(t, got[2].Tarball, "broken.tar")
	assert.Check(t, got[2].Failed != "" && got[2].Refs == nil && got[2].Origin == "", "%+v", got[2])
	assert.DeepEqual(t, fake.loadedArchives(), []string{"archive-a", "archive-b"})

	assert.Check(t, preloadImages(fake, filepath.Join(dir, "missing"), log) == nil)
}

// TestPreloadFailedLoadKeepsManifestRefs: an archive the engine cannot load (no space
// left, say) still names its images in its manifest: they stay pinned.
func TestPreloadFailedLoadKeepsManifestRefs(t *testing.T) {
	dir := t.TempDir()
	writeTar(t, filepath.Join(dir, "docker-save.tar.gz"), true, map[string]string{
		"blobs/x":       "layer",
		"manifest.json": `[{"Config":"c.json","RepoTags":["app:1","registry.local/app:1"],"Layers":[]}]`,
	})
	writeTar(t, filepath.Join(dir, "oci.tar"), false, map[string]string{
		"index.json": `{"manifests":[{"annotations":{"io.containerd.image.name":"docker.io/library/db:2"}},` +
			`{"annotations":{"org.opencontainers.image.ref.name":"latest"}},` +
			`{"annotations":{"org.opencontainers.image.ref.name":"quay.io/x/y:3"}}]}`,
	})
	fake := newFakeEngine() // it knows neither archive: both loads fail
	got := preloadImages(fake, dir, logctx.Discard())
	const failed = "load images: invalid archive"
	assert.DeepEqual(t, got, []Preloaded{
		{Tarball: "docker-save.tar.gz", Refs: []string{"app:1", "registry.local/app:1"}, Failed: failed, Origin: OriginManifest},
		{Tarball: "oci.tar", Refs: []string{"docker.io/library/db:2", "quay.io/x/y:3"}, Failed: failed, Origin: OriginManifest},
	})
}

func TestArchiveRefsErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.tar")
	writeTar(t, empty, false, map[string]string{"x": "y"})
	_, err := archiveRefs(empty)
	assert.Check(t, is.ErrorContains(err, "names no image"))
	truncated := filepath.Join(dir, "truncated.tar")
	writeTar(t, truncated, false, map[string]string{"manifest.json": `[{"RepoTags":["a:1"]}]`})
	b, err := os.ReadFile(truncated)
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(truncated, b[:520], 0o600))
	_, err = archiveRefs(truncated)
	assert.Check(t, err != nil)
	_, err = archiveRefs(filepath.Join(dir, "missing.tar"))
	assert.Check(t, err != nil)
}

// writeTar writes files (name -> content) as a tar archive, gzip-compressed with gz.
func writeTar(t *testing.T, path string, gz bool, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	var w io.Writer = &buf
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	tw := tar.NewWriter(w)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		assert.NilError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name]))}))
		_, err := tw.Write([]byte(files[name]))
		assert.NilError(t, err)
	}
	assert.NilError(t, tw.Close())
	if zw != nil {
		assert.NilError(t, zw.Close())
	}
	assert.NilError(t, os.WriteFile(path, buf.Bytes(), 0o600))
}
