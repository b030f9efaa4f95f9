package preload

import (
	"archive/tar"
	"bytes"
	"compress/bzip2"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestArchiveRefsErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.tar")
	writeTar(t, empty, "", map[string]string{"x": "y"})
	_, err := archiveRefs(empty)
	assert.Check(t, is.ErrorContains(err, "names no image"))
	truncated := filepath.Join(dir, "truncated.tar")
	writeTar(t, truncated, "", map[string]string{"manifest.json": `[{"RepoTags":["a:1"]}]`})
	b, err := os.ReadFile(truncated)
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(truncated, b[:520], 0o600))
	_, err = archiveRefs(truncated)
	assert.Check(t, err != nil)
	_, err = archiveRefs(filepath.Join(dir, "missing.tar"))
	assert.Check(t, err != nil)
	// A compressed archive cut short fails; it is not taken for a plain tarball.
	cut := filepath.Join(dir, "cut.tar.zst")
	writeTar(t, cut, "zstd", map[string]string{"blobs/x": string(make([]byte, 4096)), "manifest.json": `[{"RepoTags":["a:1"]}]`})
	b, err = os.ReadFile(cut)
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(cut, b[:len(b)/2], 0o600))
	_, err = archiveRefs(cut)
	assert.Check(t, err != nil)
}

// TestArchiveRefsCompressions reads the manifest of an archive in every compression
// k3s accepts for its airgap images, told by content: the names lie.
func TestArchiveRefsCompressions(t *testing.T) {
	files := map[string]string{
		"blobs/sha256/aa":   string(bytes.Repeat([]byte("layer"), 10000)),
		"index.json":        `{"manifests":[{"annotations":{"io.containerd.image.name":"registry.local/app:1"}}]}`,
		"manifest.json":     `[{"RepoTags":["registry.local/app:1","registry.local/app:latest"]}]`,
		"oci-layout":        `{"imageLayoutVersion":"1.0.0"}`,
		"repositories":      `{}`,
		"blobs/sha256/zz":   "config",
		"blobs/sha256/zzz1": "more",
	}
	for _, c := range []string{"", "gzip", "bzip2", "xz", "zstd", "lz4"} {
		t.Run("compression="+c, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bundle.tar") // the name says plain whatever the content
			writeTar(t, path, c, files)
			refs, err := archiveRefs(path)
			assert.NilError(t, err)
			assert.Check(t, is.DeepEqual(refs, []string{"registry.local/app:1", "registry.local/app:latest"}))
		})
	}
}

// TestArchiveRefsSeeksPlainTarballs: a plain tarball's layers are skipped, not read:
// its reader is the file itself (the tar reader seeks through an io.Seeker), and a
// layer of 4 GiB in a sparse file costs nothing.
func TestArchiveRefsSeeksPlainTarballs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.tar")
	writeSparseTar(t, path, 4<<30, `[{"RepoTags":["registry.local/big:1"]}]`)
	f, err := os.Open(path)
	assert.NilError(t, err)
	defer f.Close()
	r, closeR, err := decompressed(f)
	assert.NilError(t, err)
	closeR()
	_, seeks := r.(io.Seeker)
	assert.Check(t, seeks, "a plain tarball is read through a seeker")
	refs, err := archiveRefs(path)
	assert.NilError(t, err)
	assert.Check(t, is.DeepEqual(refs, []string{"registry.local/big:1"}))
}

// writeSparseTar writes a tarball of one layer of size zero bytes (a hole in the
// file) followed by manifest.json.
func writeSparseTar(t testing.TB, path string, size int64, manifest string) {
	t.Helper()
	var head bytes.Buffer
	tw := tar.NewWriter(&head)
	assert.NilError(t, tw.WriteHeader(&tar.Header{Name: "blobs/sha256/big", Mode: 0o644, Size: size}))
	assert.Equal(t, head.Len(), 512) // the header block, written at once; the data is the hole
	var tail bytes.Buffer
	tw = tar.NewWriter(&tail)
	assert.NilError(t, tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o644, Size: int64(len(manifest))}))
	_, err := tw.Write([]byte(manifest))
	assert.NilError(t, err)
	assert.NilError(t, tw.Close())
	f, err := os.Create(path)
	assert.NilError(t, err)
	defer f.Close()
	_, err = f.Write(head.Bytes())
	assert.NilError(t, err)
	_, err = f.WriteAt(tail.Bytes(), int64(head.Len())+(size+511)/512*512)
	assert.NilError(t, err)
}

func BenchmarkArchiveRefsSparse4GiB(b *testing.B) {
	path := filepath.Join(b.TempDir(), "big.tar")
	writeSparseTar(b, path, 4<<30, `[{"RepoTags":["registry.local/big:1"]}]`)
	for b.Loop() {
		if _, err := archiveRefs(path); err != nil {
			b.Fatal(err)
		}
	}
}

// writeTar writes files (name -> content) as a tar archive in name order, compressed
// with compression ("" for none, gzip, bzip2, xz, zstd, lz4).
func writeTar(t testing.TB, path, compression string, files map[string]string) {
	t.Helper()
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		assert.NilError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name]))}))
		_, err := tw.Write([]byte(files[name]))
		assert.NilError(t, err)
	}
	assert.NilError(t, tw.Close())
	assert.NilError(t, os.WriteFile(path, compress(t, compression, tarball.Bytes()), 0o600))
}

func compress(t testing.TB, compression string, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	var w io.WriteCloser
	var err error
	switch compression {
	case "":
		return b
	case "gzip":
		w = gzip.NewWriter(&out)
	case "bzip2":
		// The standard library has no bzip2 writer: a stream made by bzip2(1), checked.
		return bzip2Of(t, b)
	case "xz":
		w, err = xz.NewWriter(&out)
	case "zstd":
		w, err = zstd.NewWriter(&out)
	case "lz4":
		w = lz4.NewWriter(&out)
	default:
		t.Fatalf("unknown compression %q", compression)
	}
	assert.NilError(t, err)
	_, err = w.Write(b)
	assert.NilError(t, err)
	assert.NilError(t, w.Close())
	return out.Bytes()
}

// bzip2Of compresses b with bzip2(1) (the standard library only reads bzip2), and
// checks the stream with the reader archiveRefs uses.
func bzip2Of(t testing.TB, b []byte) []byte {
	t.Helper()
	if _, err := exec.LookPath("bzip2"); err != nil {
		t.Skip("bzip2(1) is not installed")
	}
	cmd := exec.Command("bzip2", "-c")
	cmd.Stdin = bytes.NewReader(b)
	out, err := cmd.Output()
	assert.NilError(t, err)
	back, err := io.ReadAll(bzip2.NewReader(bytes.NewReader(out)))
	assert.NilError(t, err)
	assert.Assert(t, bytes.Equal(back, b))
	return out
}
