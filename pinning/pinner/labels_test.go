package pinner

import (
	"testing"

	"github.com/dockpin/cri-dockerd/pinning/internal/pintest"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"gotest.tools/v3/assert"
)

func TestConfigLabel(t *testing.T) {
	pinned := []pin.Reason{{Source: pin.SourceConfigLabel, Detail: "label io.cri-containerd.pinned=pinned"}}
	tests := []struct {
		name         string
		configLabels bool
		labels       map[string]string
		want         []pin.Reason
	}{
		{"exact value", true, map[string]string{pin.PinnedLabel: "pinned"}, pinned},
		{"value true", true, map[string]string{pin.PinnedLabel: "true"}, nil},
		{"value upper case", true, map[string]string{pin.PinnedLabel: "Pinned"}, nil},
		{"empty value", true, map[string]string{pin.PinnedLabel: ""}, nil},
		{"misspelled key", true, map[string]string{pin.MisspelledLabel: "pinned"}, nil},
		{"no labels", true, nil, nil},
		{"disabled", false, map[string]string{pin.PinnedLabel: "pinned"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := emptyConfig()
			cfg.ConfigLabels = tc.configLabels
			p, _, _ := newTestPinner(t, cfg)
			img := pin.Image{ID: pintest.DigA, RepoTags: []string{"app:1"}, Labels: tc.labels}
			assert.DeepEqual(t, pintest.EvaluateOne(t, p, img), tc.want)
			assert.DeepEqual(t, p.Check(t.Context(), img), tc.want)
		})
	}
}

func TestNearMissWarnings(t *testing.T) {
	tests := []struct {
		name      string
		cfgLabels bool
		labels    map[string]string
		wantLabel string // "" = no warning
	}{
		{"value true", true, map[string]string{pin.PinnedLabel: "true"}, pin.PinnedLabel},
		{"misspelled key", true, map[string]string{pin.MisspelledLabel: "pinned"}, pin.MisspelledLabel},
		{"misspelled key but pinned", true, map[string]string{pin.MisspelledLabel: "pinned", pin.PinnedLabel: "pinned"}, ""},
		{"disabled", false, map[string]string{pin.MisspelledLabel: "pinned"}, ""},
		{"unrelated", true, map[string]string{"a": "b"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := emptyConfig()
			cfg.ConfigLabels = tc.cfgLabels
			p, clock, hook := newTestPinner(t, cfg)
			img := pin.Image{ID: pintest.DigA, RepoTags: []string{"<none>:<none>", "app:1"}, Labels: tc.labels}
			for range 3 { // ListImages and ImageStatus within the interval
				pintest.EvaluateOne(t, p, img)
				p.Check(t.Context(), img)
			}
			warns := pintest.Warnings(hook)
			if tc.wantLabel == "" {
				assert.Equal(t, len(warns), 0)
				return
			}
			assert.Equal(t, len(warns), 1)
			assert.Equal(t, warns[0].Data["image"], pintest.DigA)
			assert.Equal(t, warns[0].Data["ref"], "app:1")
			assert.Equal(t, warns[0].Data["label"], tc.wantLabel)

			clock.Advance(cfg.WarnInterval)
			pintest.EvaluateOne(t, p, img)
			assert.Equal(t, len(pintest.Warnings(hook)), 2, "warns again after the interval")
		})
	}
}

func TestNearMissBothLabels(t *testing.T) {
	p, _, hook := newTestPinner(t, DefaultConfig())
	img := pin.Image{ID: pintest.DigA, Labels: map[string]string{pin.PinnedLabel: "true", pin.MisspelledLabel: "pinned"}}
	assert.Assert(t, pintest.EvaluateOne(t, p, img) == nil)
	assert.Equal(t, len(pintest.Warnings(hook)), 2)
}

func TestLabelSelectors(t *testing.T) {
	tests := []struct {
		selector string
		labels   map[string]string
		want     []pin.Reason
	}{
		{"team", map[string]string{"team": ""}, []pin.Reason{{Source: pin.SourceLabelSelector, Detail: "label team"}}},
		{"team", map[string]string{"team": "infra"}, []pin.Reason{{Source: pin.SourceLabelSelector, Detail: "label team"}}},
		{"team", map[string]string{"other": "team"}, nil},
		{"tier=infra", map[string]string{"tier": "infra"}, []pin.Reason{{Source: pin.SourceLabelSelector, Detail: "label tier=infra"}}},
		{" tier = infra ", map[string]string{"tier": "infra"}, []pin.Reason{{Source: pin.SourceLabelSelector, Detail: "label tier=infra"}}},
		{"tier=infra", map[string]string{"tier": "Infra"}, nil},
		{"tier=infra", map[string]string{"tier": "infra-2"}, nil},
		{"tier=", map[string]string{"tier": ""}, []pin.Reason{{Source: pin.SourceLabelSelector, Detail: "label tier="}}},
		{"tier=", map[string]string{"tier": "x"}, nil},
		{"a=b=c", map[string]string{"a": "b=c"}, []pin.Reason{{Source: pin.SourceLabelSelector, Detail: "label a=b=c"}}},
	}
	for _, tc := range tests {
		t.Run(tc.selector, func(t *testing.T) {
			cfg := emptyConfig()
			cfg.LabelSelectors = []string{tc.selector}
			p, _, _ := newTestPinner(t, cfg)
			assert.DeepEqual(t, pintest.EvaluateOne(t, p, pin.Image{ID: pintest.DigA, Labels: tc.labels}), tc.want)
		})
	}
}
