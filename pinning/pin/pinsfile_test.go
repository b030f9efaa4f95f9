package pin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func writePins(t *testing.T, path string, lines ...string) {
	t.Helper()
	assert.NilError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
}

func TestCheckPinsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pins")
	writePins(t, path, "# comment", "busybox:1.36", "registry.k8s.io/*")
	n, err := CheckPinsFile(path)
	assert.NilError(t, err)
	assert.Equal(t, n, 2)
	writePins(t, path, "ok", "*", "a b")
	_, err = CheckPinsFile(path)
	assert.Check(t, is.ErrorContains(err, "line 2"))
	assert.Check(t, is.ErrorContains(err, "line 3"))
	_, err = CheckPinsFile(path + ".missing")
	assert.Check(t, is.ErrorContains(err, "read pins file"))
}

func TestStripComment(t *testing.T) {
	tests := map[string]string{
		"busybox":           "busybox",
		"  busybox  ":       "busybox",
		"# comment":         "",
		"   # comment":      "",
		"busybox # comment": "busybox",
		"busybox\t#comment": "busybox",
		"busybox#notacomm":  "busybox#notacomm",
		"":                  "",
	}
	for in, want := range tests {
		assert.Equal(t, StripComment(in), want, "input %q", in)
	}
}

func TestParsePinsReportsEveryBadLine(t *testing.T) {
	_, err := parsePins("f", strings.NewReader("a*b\nok\n*\n"))
	assert.ErrorContains(t, err, `pins file "f" line 1`)
	assert.ErrorContains(t, err, `pins file "f" line 3`)
}
