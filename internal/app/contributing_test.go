package app

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
)

// TestContributingPackageMap: the package map of CONTRIBUTING.md names only folders that
// exist, and every package of this module that holds code (hack's own tools aside) has
// its row, so the map cannot drift from the tree.
func TestContributingPackageMap(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "CONTRIBUTING.md"))
	assert.NilError(t, err)
	section, ok := strings.CutPrefix(string(b)[strings.Index(string(b), "\n## Package map\n")+1:], "## Package map\n")
	assert.Assert(t, ok, "CONTRIBUTING.md has no \"## Package map\" section")
	section, _, _ = strings.Cut(section, "\n## ")
	rowRE := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")
	listed := map[string]bool{}
	for _, m := range rowRE.FindAllStringSubmatch(section, -1) {
		dir := m[1]
		listed[dir] = true
		st, err := os.Stat(filepath.Join(root, dir))
		if assert.Check(t, err == nil, "CONTRIBUTING.md names %s, which does not exist", dir) {
			assert.Check(t, st.IsDir(), "CONTRIBUTING.md names %s, which is not a folder", dir)
		}
	}
	assert.Assert(t, len(listed) > 10, "no package rows found in CONTRIBUTING.md's package map")
	missing := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case rel != "." && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata"):
				return filepath.SkipDir
			case rel == "hack": // the scripts' own tools are hack's row
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			if dir := filepath.ToSlash(filepath.Dir(rel)); !listed[dir] && !missing[dir] {
				missing[dir] = true
				t.Errorf("package %s has no row in CONTRIBUTING.md's package map", dir)
			}
		}
		return nil
	})
	assert.NilError(t, err)
}
