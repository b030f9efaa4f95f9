package preload

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
)

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
