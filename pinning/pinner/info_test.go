package pinner

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/dockpin/cri-dockerd/pinning/internal/pintest"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"gotest.tools/v3/assert"
)

func TestInfo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pins")
	writePins(t, path, "busybox")
	cfg := DefaultConfig()
	cfg.Patterns = []string{"registry.k8s.io/*"}
	cfg.LabelSelectors = []string{" team ", "tier=infra"}
	cfg.PinsFile = path
	src := pintest.NewFakeSource("ctr", pintest.DigC)
	p, _, _ := newTestPinner(t, cfg, src)

	info := p.Info()
	assert.DeepEqual(t, info["lastEvaluation"], map[string]any{})
	assert.Equal(t, sourceInfo(t, p)["healthy"], false, "no snapshot yet")

	pintest.MustEvaluate(t, p, t.Context(), []pin.Image{
		{ID: pintest.DigA, RepoTags: []string{"registry.k8s.io/pause:3.10"}},
		{ID: pintest.DigB, RepoTags: []string{"busybox:1"}, Labels: map[string]string{pin.PinnedLabel: pin.PinnedValue}},
		{ID: pintest.DigC, RepoTags: []string{"nginx:1"}},
		{ID: "sha256:" + "d0d0", RepoTags: []string{"alpine:3"}},
	})
	info = p.Info()
	assert.Equal(t, info["sandboxImage"], DefaultSandboxImage)
	assert.Equal(t, info["configLabels"], true)
	assert.DeepEqual(t, info["patterns"], []string{"registry.k8s.io/*"})
	assert.DeepEqual(t, info["labelSelectors"], []string{"team", "tier=infra"})

	file := info["pinsFile"].(map[string]any)
	assert.Equal(t, file["path"], path)
	assert.DeepEqual(t, file["patterns"], []string{"busybox"})
	assert.Assert(t, file["loadedAt"] != "")
	assert.Equal(t, file["lastError"], "")

	s := sourceInfo(t, p)
	assert.Equal(t, s["name"], "ctr")
	assert.Equal(t, s["healthy"], true)
	assert.Assert(t, s["lastRefresh"] != "")
	assert.DeepEqual(t, s["status"], map[string]any{"namespace": "moby"})

	eval := info["lastEvaluation"].(map[string]any)
	assert.Equal(t, eval["images"], 4)
	assert.Equal(t, eval["pinned"], 3)
	assert.DeepEqual(t, eval["bySource"], map[string]int{
		pin.SourceSandboxImage: 1, pin.SourcePattern: 1, pin.SourceConfigLabel: 1, pin.SourcePinsFile: 1, pin.SourceContainerd: 1,
	})

	_, err := json.Marshal(info)
	assert.NilError(t, err)
}

func TestInfoWithoutPinsFile(t *testing.T) {
	p, _, _ := newTestPinner(t, emptyConfig())
	file := p.Info()["pinsFile"].(map[string]any)
	assert.Equal(t, file["path"], "")
	assert.DeepEqual(t, file["patterns"], []string{})
	_, err := json.Marshal(p.Info())
	assert.NilError(t, err)
}
