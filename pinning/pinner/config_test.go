package pinner

import (
	"testing"
	"time"

	"github.com/dockpin/cri-dockerd/pinning/internal/pintest"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"gotest.tools/v3/assert"
)

func TestDefaultConfigIsValid(t *testing.T) {
	cfg := DefaultConfig()
	assert.NilError(t, cfg.Validate())
	assert.Equal(t, cfg.ConfigLabels, true)
	assert.Equal(t, cfg.MaxStaleness, time.Duration(0))
	assert.Equal(t, cfg.SnapshotTTL, 2*time.Second)
	assert.Equal(t, cfg.WarnInterval, 10*time.Minute)
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		want   []string // substrings of the error; none = valid
	}{
		{"patterns", func(c *Config) { c.Patterns = []string{"busybox", "*pause*", "quay.io/*", pintest.DigA} }, nil},
		{"bad patterns", func(c *Config) { c.Patterns = []string{"ok", "FOO:", "a*b"} },
			[]string{`invalid pinned image pattern "FOO:"`, `invalid pinned image pattern "a*b"`}},
		{"bad selector", func(c *Config) { c.LabelSelectors = []string{"ok", "=x"} },
			[]string{`invalid pinned image label selector "=x"`}},
		{"sandbox wildcard", func(c *Config) { c.SandboxImage = "registry.k8s.io/*" },
			[]string{`invalid sandbox image "registry.k8s.io/*"`}},
		{"sandbox bad", func(c *Config) { c.SandboxImage = "Pause:3" },
			[]string{`invalid sandbox image "Pause:3"`}},
		{"no sandbox", func(c *Config) { c.SandboxImage = "" }, nil},
		{"negative durations", func(c *Config) { c.MaxStaleness, c.SnapshotTTL, c.WarnInterval = -1, -1, -1 },
			[]string{"max staleness", "snapshot ttl", "warn interval"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.modify(&cfg)
			err := cfg.Validate()
			if len(tc.want) == 0 {
				assert.NilError(t, err)
				return
			}
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
			_, err = New(cfg, nil)
			assert.ErrorContains(t, err, tc.want[0])
		})
	}
}

func TestSandboxImage(t *testing.T) {
	tests := []struct {
		name    string
		sandbox string
		img     pin.Image
		pinned  bool
	}{
		{"registry.k8s.io tag", "registry.k8s.io/pause:3.10", pin.Image{ID: pintest.DigC, RepoTags: []string{"registry.k8s.io/pause:3.10"}}, true},
		{"other tag", "registry.k8s.io/pause:3.10", pin.Image{ID: pintest.DigC, RepoTags: []string{"registry.k8s.io/pause:3.9"}}, false},
		{"qualified vs familiar", "docker.io/rancher/mirrored-pause:3.6", pin.Image{ID: pintest.DigC, RepoTags: []string{"rancher/mirrored-pause:3.6"}}, true},
		{"familiar vs familiar", "rancher/mirrored-pause:3.6", pin.Image{ID: pintest.DigC, RepoTags: []string{"rancher/mirrored-pause:3.6"}}, true},
		{"by repo digest", "registry.k8s.io/pause@" + pintest.DigA, pin.Image{ID: pintest.DigC, RepoDigests: []string{"registry.k8s.io/pause@" + pintest.DigA}}, true},
		{"by image ID", "registry.k8s.io/pause@" + pintest.DigA, pin.Image{ID: pintest.DigA}, true},
		{"digest differs", "registry.k8s.io/pause@" + pintest.DigA, pin.Image{ID: pintest.DigB, RepoDigests: []string{"registry.k8s.io/pause@" + pintest.DigB}}, false},
		{"no tag means latest", "pause", pin.Image{ID: pintest.DigC, RepoTags: []string{"pause:latest"}}, true},
		{"no tag is not every tag", "pause", pin.Image{ID: pintest.DigC, RepoTags: []string{"pause:3.10"}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := emptyConfig()
			cfg.SandboxImage = tc.sandbox
			p, _, _ := newTestPinner(t, cfg)
			var want []pin.Reason
			if tc.pinned {
				want = []pin.Reason{{Source: pin.SourceSandboxImage, Detail: tc.sandbox}}
			}
			assert.DeepEqual(t, pintest.EvaluateOne(t, p, tc.img), want)
		})
	}
}
