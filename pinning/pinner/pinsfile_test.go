package pinner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/dockpin/cri-dockerd/pinning/internal/pintest"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/sirupsen/logrus"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
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

func fileReasons(t testing.TB, p *Pinner, img pin.Image) []string {
	t.Helper()
	var out []string
	for _, r := range pintest.EvaluateOne(t, p, img) {
		if r.Source == pin.SourcePinsFile {
			out = append(out, r.Detail)
		}
	}
	return out
}

var (
	busyboxImg = pin.Image{ID: pintest.DigA, RepoTags: []string{"busybox:1.36"}}
	pauseImg   = pin.Image{ID: pintest.DigB, RepoTags: []string{"registry.k8s.io/pause:3.10"}}
)

func TestPinsFileLoad(t *testing.T) {
	p, _ := pinsFilePinner(t,
		"# pinned for the air-gapped nodes",
		"",
		"   busybox   # trailing comment",
		"\tregistry.k8s.io/*\t# tab before comment",
		"*pause*",
	)
	assert.DeepEqual(t, fileReasons(t, p, busyboxImg), []string{"busybox"})
	assert.DeepEqual(t, fileReasons(t, p, pauseImg), []string{"registry.k8s.io/*", "*pause*"})
	assert.DeepEqual(t, fileReasons(t, p, pin.Image{ID: pintest.DigC, RepoTags: []string{"nginx:1"}}), []string(nil))
}

func TestPinsFileReload(t *testing.T) {
	p, path := pinsFilePinner(t, "busybox")
	assert.DeepEqual(t, fileReasons(t, p, busyboxImg), []string{"busybox"})

	writePins(t, path, "registry.k8s.io/pause:3.10")
	assert.NilError(t, p.Reload())
	assert.DeepEqual(t, fileReasons(t, p, busyboxImg), []string(nil))
	assert.DeepEqual(t, fileReasons(t, p, pauseImg), []string{"registry.k8s.io/pause:3.10"})
}

func TestPinsFileReloadBadLineKeepsOldSet(t *testing.T) {
	p, path := pinsFilePinner(t, "busybox")
	writePins(t, path, "# comment", "nginx", "bad*pattern", "alpine")
	err := p.Reload()
	assert.ErrorContains(t, err, `pins file "`+path+`" line 3: invalid pinned image pattern "bad*pattern"`)
	assert.DeepEqual(t, fileReasons(t, p, busyboxImg), []string{"busybox"})
	assert.DeepEqual(t, fileReasons(t, p, pin.Image{ID: pintest.DigC, RepoTags: []string{"nginx:1"}}), []string(nil))

	info := p.Info()["pinsFile"].(map[string]any)
	assert.DeepEqual(t, info["patterns"], []string{"busybox"})
	assert.ErrorContains(t, err, info["lastError"].(string))
}

func TestPinsFileReloadMissingKeepsOldSet(t *testing.T) {
	p, path := pinsFilePinner(t, "busybox")
	assert.NilError(t, os.Remove(path))
	assert.ErrorContains(t, p.Reload(), "read pins file")
	assert.DeepEqual(t, fileReasons(t, p, busyboxImg), []string{"busybox"})

	writePins(t, path, "alpine")
	assert.NilError(t, p.Reload())
	assert.DeepEqual(t, fileReasons(t, p, busyboxImg), []string(nil))
	assert.Equal(t, p.Info()["pinsFile"].(map[string]any)["lastError"], "")
}

// TestPinsFileAtStartWithoutSavedState: a missing or bad pins file does not stop the
// process; with no good version saved, ListImages is refused (naming the file and the
// line) until a reload succeeds, and ImageStatus goes on.
func TestPinsFileAtStartWithoutSavedState(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, want string
		lines      []string
	}{
		{name: "missing", want: "read pins file"},
		{name: "bad", want: "line 3", lines: []string{"ok", "", "FOO:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := emptyConfig()
			cfg.StateDir = filepath.Join(dir, tc.name+"-state")
			cfg.PinsFile = filepath.Join(dir, tc.name)
			if tc.lines != nil {
				writePins(t, cfg.PinsFile, tc.lines...)
			}
			p, _, hook := newTestPinner(t, cfg)
			_, err := p.Evaluate(t.Context(), []pin.Image{busyboxImg})
			assert.Check(t, cerrdefs.IsUnavailable(err), "got %v", err)
			assert.Check(t, errors.Is(err, pin.ErrNoPinState))
			assert.Check(t, is.ErrorContains(err, tc.want))
			assert.Check(t, is.ErrorContains(err, cfg.PinsFile))
			assert.Check(t, p.Check(t.Context(), busyboxImg) == nil)
			assert.Check(t, is.Contains(hook.LastEntry().Message, "PINS FILE NOT LOADED"))
			assert.Check(t, is.Contains(p.Info()["pinsFile"].(map[string]any)["lastError"], tc.want))

			writePins(t, cfg.PinsFile, "busybox")
			assert.NilError(t, p.Reload())
			assert.DeepEqual(t, fileReasons(t, p, busyboxImg), []string{"busybox"})
		})
	}
}

// TestPinsFileAtStartUsesSavedState: the last good pins file, saved at a good load,
// stays in force when the file is bad at the next start.
func TestPinsFileAtStartUsesSavedState(t *testing.T) {
	cfg := emptyConfig()
	cfg.StateDir = t.TempDir()
	cfg.PinsFile = filepath.Join(t.TempDir(), "pins")
	writePins(t, cfg.PinsFile, "busybox:1.36 # the base", "alpine")
	p, _, _ := newTestPinner(t, cfg)
	assert.DeepEqual(t, fileReasons(t, p, busyboxImg), []string{"busybox:1.36"})

	writePins(t, cfg.PinsFile, "busybox:1.36", "BAD:") // a typo, then a reboot
	p2, _, hook := newTestPinner(t, cfg)
	assert.DeepEqual(t, fileReasons(t, p2, busyboxImg), []string{"busybox:1.36"})
	assert.Check(t, is.Contains(hook.LastEntry().Message, "last good version"))
	assert.Equal(t, hook.LastEntry().Level, logrus.ErrorLevel)
	info := p2.Info()["pinsFile"].(map[string]any)
	assert.Equal(t, info["restored"], true)
	assert.Check(t, is.Contains(info["lastError"], "line 2"))
	assert.DeepEqual(t, info["patterns"], []string{"busybox:1.36", "alpine"})

	// Another file path: the saved state is not its.
	other := cfg
	other.PinsFile = cfg.PinsFile + ".other"
	p3, _, _ := newTestPinner(t, other)
	_, err := p3.Evaluate(t.Context(), []pin.Image{busyboxImg})
	assert.Check(t, cerrdefs.IsUnavailable(err))
}

func TestReloadWithoutPinsFile(t *testing.T) {
	p, _, _ := newTestPinner(t, emptyConfig())
	assert.NilError(t, p.Reload())
}
