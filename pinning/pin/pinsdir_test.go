package pin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	is "gotest.tools/v3/assert/cmp"

	"gotest.tools/v3/assert"
)

func TestPinsDirFiles(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b.pins", "a", ".hidden", "old~", "x.dpkg-old", "y.rpmnew", "z.swp", "w.ucf-dist"} {
		writePins(t, filepath.Join(dir, n), "busybox")
	}
	assert.NilError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o700))
	// A ConfigMap volume: each key is a link into ..data.
	assert.NilError(t, os.Mkdir(filepath.Join(dir, "..data"), 0o700))
	writePins(t, filepath.Join(dir, "..data", "c"), "nginx")
	assert.NilError(t, os.Symlink("..data/c", filepath.Join(dir, "c")))
	assert.NilError(t, os.Symlink("nowhere", filepath.Join(dir, "dangling")))

	names, err := PinsDirFiles(dir)
	assert.NilError(t, err)
	assert.DeepEqual(t, names, []string{"a", "b.pins", "c"})

	names, err = PinsDirFiles(filepath.Join(dir, "missing"))
	assert.NilError(t, err)
	assert.Check(t, is.Len(names, 0))
}

func TestPinsFileTooLargeIsNotRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge")
	f, err := os.Create(path)
	assert.NilError(t, err)
	assert.NilError(t, f.Truncate(maxPinsFileBytes+1)) // sparse: nothing to read if it were
	assert.NilError(t, f.Close())
	_, err = loadPinsFile(path)
	assert.ErrorContains(t, err, "more than the")
}

func TestPinsFileLongLineFailsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pins")
	writePins(t, path, "busybox", strings.Repeat("a", 100<<10), "nginx")
	_, err := loadPinsFile(path)
	assert.ErrorContains(t, err, "line 2") // a bad line, not a silently dropped rest of the file
}
