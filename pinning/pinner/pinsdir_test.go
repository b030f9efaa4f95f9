package pinner

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dockpin/cri-dockerd/pinning/pin"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func pinsDirPinner(t *testing.T) (*Pinner, string, string) {
	t.Helper()
	root := t.TempDir()
	file, dir := filepath.Join(root, "pins"), filepath.Join(root, "pins.d")
	assert.NilError(t, os.Mkdir(dir, 0o700))
	writePins(t, file, "busybox")
	writePins(t, filepath.Join(dir, "10-k8s"), "registry.k8s.io/*")
	cfg := emptyConfig()
	cfg.PinsFile, cfg.PinsDir = file, dir
	p, _, _ := newTestPinner(t, cfg)
	return p, file, dir
}

func TestPinsDirLoadsAfterTheFile(t *testing.T) {
	p, _, dir := pinsDirPinner(t)
	assert.DeepEqual(t, fileReasons(t, p, busyboxImg), []string{"busybox"})
	assert.DeepEqual(t, fileReasons(t, p, pauseImg), []string{"registry.k8s.io/*"})

	writePins(t, filepath.Join(dir, "20-app"), "*pause*")
	assert.NilError(t, p.Reload())
	assert.DeepEqual(t, fileReasons(t, p, pauseImg), []string{"registry.k8s.io/*", "*pause*"})
	files, _ := p.Info()["pinsFile"].(map[string]any)["files"].([]string)
	assert.Check(t, is.Len(files, 3))
}

func TestPinsDirBadFileKeepsOldSet(t *testing.T) {
	p, _, dir := pinsDirPinner(t)
	writePins(t, filepath.Join(dir, "20-bad"), "busybox", "UPPER/Case:tag")
	err := p.Reload()
	assert.ErrorContains(t, err, "20-bad")
	assert.ErrorContains(t, err, "line 2")
	// Both files' old patterns stay in force.
	assert.DeepEqual(t, fileReasons(t, p, busyboxImg), []string{"busybox"})
	assert.DeepEqual(t, fileReasons(t, p, pauseImg), []string{"registry.k8s.io/*"})
}

func TestPinsDirMissingPinsNothing(t *testing.T) {
	cfg := emptyConfig()
	cfg.PinsDir = filepath.Join(t.TempDir(), "absent")
	p, _, _ := newTestPinner(t, cfg)
	assert.Check(t, is.Len(fileReasons(t, p, busyboxImg), 0)) // Evaluate answers: nothing to refuse
}

// A state saved by a version without pins directories (no "dir") still answers for the
// pins file after an upgrade that reads the default pins directory too; a state saved
// for another directory does not.
func TestPinsFileSavedBeforePinsDirs(t *testing.T) {
	cfg := emptyConfig()
	cfg.StateDir = t.TempDir()
	cfg.PinsFile = filepath.Join(t.TempDir(), "pins")
	writePins(t, cfg.PinsFile, "BAD:") // a bad file at the first start of the new version
	saved := `{"path":"` + cfg.PinsFile + `","patterns":["busybox:1.36"],"loadedAt":"2026-11-01T00:00:00Z"}`
	assert.NilError(t, os.WriteFile(filepath.Join(cfg.StateDir, pinsFileStateName+".json"), []byte(saved), 0o600))
	upgraded := cfg
	upgraded.PinsDir = filepath.Join(t.TempDir(), "pins.d")
	p, _, _ := newTestPinner(t, upgraded)
	assert.DeepEqual(t, fileReasons(t, p, busyboxImg), []string{"busybox:1.36"})

	saved = `{"path":"` + cfg.PinsFile + `","dir":"/elsewhere","patterns":["busybox:1.36"],"loadedAt":"2026-11-01T00:00:00Z"}`
	assert.NilError(t, os.WriteFile(filepath.Join(cfg.StateDir, pinsFileStateName+".json"), []byte(saved), 0o600))
	p2, _, _ := newTestPinner(t, upgraded)
	_, err := p2.Evaluate(t.Context(), []pin.Image{busyboxImg})
	assert.Check(t, err != nil, "another directory's saved patterns are not these")
}
