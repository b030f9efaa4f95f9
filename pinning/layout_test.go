package pinning

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
)

// maxPackageLines bounds each pinning package (non-test lines): past it, a package
// holds more than one job and is split, as pinning itself was.
const maxPackageLines = 1500

// TestPackagesStaySmall: no package of pinning grows past maxPackageLines.
func TestPackagesStaySmall(t *testing.T) {
	lines := map[string]int{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines[filepath.Dir(path)] += bytes.Count(b, []byte("\n"))
		return nil
	})
	assert.NilError(t, err)
	assert.Assert(t, len(lines) > 5, "packages found: %v", lines)
	for dir, n := range lines {
		assert.Check(t, n <= maxPackageLines, "pinning/%s has %d lines (at most %d): split it", dir, n, maxPackageLines)
	}
}
