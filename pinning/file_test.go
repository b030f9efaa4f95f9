package pinning

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
)

func writePins(t *testing.T, path string, lines ...string) {
	t.Helper()
	assert.NilError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
}

func pinsFilePinner(t *testing.T, lines ...string) (*Pinner, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pins")
	writePins(t, path, lines...)
	cfg := emptyConfig()
	cfg.PinsFile = path
	p, _, _ := newTestPinner(t, cfg)
	return p, path
}

func fileReasons(p *Pinner, img Image) []string {
	var out []string
	for _, r := range evaluateOne(p, img) {
		if r.Source == SourcePinsFile {
			out = append(out, r.Detail)
		}
	}
	return out
}

var (
	busyboxImg = Image{ID: digA, RepoTags: []string{"busybox:1.36"}}
	pauseImg   = Image{ID: digB, RepoTags: []string{"registry.k8s.io/pause:3.10"}}
)

func TestPinsFileLoad(t *testing.T) {
	p, _ := pinsFilePinner(t,
		"# pinned for the air-gapped nodes",
		"",
		"   busybox   # trailing comment",
		"\tregistry.k8s.io/*\t# tab before comment",
		"*pause*",
	)
	assert.DeepEqual(t, fileReasons(p, busyboxImg), []string{"busybox"})
	assert.DeepEqual(t, fileReasons(p, pauseImg), []string{"registry.k8s.io/*", "*pause*"})
	assert.DeepEqual(t, fileReasons(p, Image{ID: digC, RepoTags: []string{"nginx:1"}}), []string(nil))
}

func TestPinsFileReload(t *testing.T) {
	p, path := pinsFilePinner(t, "busybox")
	assert.DeepEqual(t, fileReasons(p, busyboxImg), []string{"busybox"})

	writePins(t, path, "registry.k8s.io/pause:3.10")
	assert.NilError(t, p.Reload())
	assert.DeepEqual(t, fileReasons(p, busyboxImg), []string(nil))
	assert.DeepEqual(t, fileReasons(p, pauseImg), []string{"registry.k8s.io/pause:3.10"})
}

func TestPinsFileReloadBadLineKeepsOldSet(t *testing.T) {
	p, path := pinsFilePinner(t, "busybox")
	writePins(t, path, "# comment", "nginx", "bad*pattern", "alpine")
	err := p.Reload()
	assert.ErrorContains(t, err, `pins file "`+path+`" line 3: invalid pinned image pattern "bad*pattern"`)
	assert.DeepEqual(t, fileReasons(p, busyboxImg), []string{"busybox"})
	assert.DeepEqual(t, fileReasons(p, Image{ID: digC, RepoTags: []string{"nginx:1"}}), []string(nil))

	info := p.Info()["pinsFile"].(map[string]any)
	assert.DeepEqual(t, info["patterns"], []string{"busybox"})
	assert.ErrorContains(t, err, info["lastError"].(string))
}

func TestPinsFileReloadMissingKeepsOldSet(t *testing.T) {
	p, path := pinsFilePinner(t, "busybox")
	assert.NilError(t, os.Remove(path))
	assert.ErrorContains(t, p.Reload(), "read pins file")
	assert.DeepEqual(t, fileReasons(p, busyboxImg), []string{"busybox"})

	writePins(t, path, "alpine")
	assert.NilError(t, p.Reload())
	assert.DeepEqual(t, fileReasons(p, busyboxImg), []string(nil))
	assert.Equal(t, p.Info()["pinsFile"].(map[string]any)["lastError"], "")
}

func TestPinsFileAtStart(t *testing.T) {
	dir := t.TempDir()
	cfg := emptyConfig()
	cfg.PinsFile = filepath.Join(dir, "missing")
	_, err := New(cfg, nil)
	assert.ErrorContains(t, err, "read pins file")

	cfg.PinsFile = filepath.Join(dir, "bad")
	writePins(t, cfg.PinsFile, "ok", "", "FOO:")
	_, err = New(cfg, nil)
	assert.ErrorContains(t, err, "line 3")
}

func TestReloadWithoutPinsFile(t *testing.T) {
	p, _, _ := newTestPinner(t, emptyConfig())
	assert.NilError(t, p.Reload())
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
		assert.Equal(t, stripComment(in), want, "input %q", in)
	}
}

func TestParsePinsReportsEveryBadLine(t *testing.T) {
	_, err := parsePins("f", strings.NewReader("a*b\nok\n*\n"))
	assert.ErrorContains(t, err, `pins file "f" line 1`)
	assert.ErrorContains(t, err, `pins file "f" line 3`)
}
