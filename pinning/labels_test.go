package pinning

import (
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

func TestConfigLabel(t *testing.T) {
	pinned := []Reason{{Source: SourceConfigLabel, Detail: "label io.cri-containerd.pinned=pinned"}}
	tests := []struct {
		name         string
		configLabels bool
		labels       map[string]string
		want         []Reason
	}{
		{"exact value", true, map[string]string{PinnedLabel: "pinned"}, pinned},
		{"value true", true, map[string]string{PinnedLabel: "true"}, nil},
		{"value upper case", true, map[string]string{PinnedLabel: "Pinned"}, nil},
		{"empty value", true, map[string]string{PinnedLabel: ""}, nil},
		{"misspelled key", true, map[string]string{MisspelledLabel: "pinned"}, nil},
		{"no labels", true, nil, nil},
		{"disabled", false, map[string]string{PinnedLabel: "pinned"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := emptyConfig()
			cfg.ConfigLabels = tc.configLabels
			p, _, _ := newTestPinner(t, cfg)
			img := Image{ID: digA, RepoTags: []string{"app:1"}, Labels: tc.labels}
			assert.DeepEqual(t, evaluateOne(t, p, img), tc.want)
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
		{"value true", true, map[string]string{PinnedLabel: "true"}, PinnedLabel},
		{"misspelled key", true, map[string]string{MisspelledLabel: "pinned"}, MisspelledLabel},
		{"misspelled key but pinned", true, map[string]string{MisspelledLabel: "pinned", PinnedLabel: "pinned"}, ""},
		{"disabled", false, map[string]string{MisspelledLabel: "pinned"}, ""},
		{"unrelated", true, map[string]string{"a": "b"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := emptyConfig()
			cfg.ConfigLabels = tc.cfgLabels
			p, clock, hook := newTestPinner(t, cfg)
			img := Image{ID: digA, RepoTags: []string{"<none>:<none>", "app:1"}, Labels: tc.labels}
			for range 3 { // ListImages and ImageStatus within the interval
				evaluateOne(t, p, img)
				p.Check(t.Context(), img)
			}
			warns := warnings(hook)
			if tc.wantLabel == "" {
				assert.Equal(t, len(warns), 0)
				return
			}
			assert.Equal(t, len(warns), 1)
			assert.Equal(t, warns[0].Data["image"], digA)
			assert.Equal(t, warns[0].Data["ref"], "app:1")
			assert.Equal(t, warns[0].Data["label"], tc.wantLabel)

			clock.Advance(cfg.WarnInterval)
			evaluateOne(t, p, img)
			assert.Equal(t, len(warnings(hook)), 2, "warns again after the interval")
		})
	}
}

func TestNearMissBothLabels(t *testing.T) {
	p, _, hook := newTestPinner(t, DefaultConfig())
	img := Image{ID: digA, Labels: map[string]string{PinnedLabel: "true", MisspelledLabel: "pinned"}}
	assert.Assert(t, evaluateOne(t, p, img) == nil)
	assert.Equal(t, len(warnings(hook)), 2)
}

func TestWarnLimiter(t *testing.T) {
	now := time.Now()
	w := newWarnLimiter(time.Minute, 2)
	assert.Assert(t, w.allow("a", now))
	assert.Assert(t, !w.allow("a", now.Add(30*time.Second)))
	assert.Assert(t, w.allow("b", now.Add(40*time.Second)))
	// Full: "a" has expired by now and is pruned, "b" is kept.
	assert.Assert(t, w.allow("c", now.Add(70*time.Second)))
	assert.Assert(t, !w.allow("b", now.Add(80*time.Second)))
	assert.Assert(t, len(w.last) <= 2)
	// Full of live keys: everything is forgotten rather than growing.
	assert.Assert(t, w.allow("d", now.Add(90*time.Second)))
	assert.Assert(t, len(w.last) <= 2)

	always := newWarnLimiter(0, 2)
	assert.Assert(t, always.allow("a", now))
	assert.Assert(t, always.allow("a", now), "interval 0 warns every time")
}

func TestLabelSelectors(t *testing.T) {
	tests := []struct {
		selector string
		labels   map[string]string
		want     []Reason
	}{
		{"team", map[string]string{"team": ""}, []Reason{{SourceLabelSelector, "label team"}}},
		{"team", map[string]string{"team": "infra"}, []Reason{{SourceLabelSelector, "label team"}}},
		{"team", map[string]string{"other": "team"}, nil},
		{"tier=infra", map[string]string{"tier": "infra"}, []Reason{{SourceLabelSelector, "label tier=infra"}}},
		{" tier = infra ", map[string]string{"tier": "infra"}, []Reason{{SourceLabelSelector, "label tier=infra"}}},
		{"tier=infra", map[string]string{"tier": "Infra"}, nil},
		{"tier=infra", map[string]string{"tier": "infra-2"}, nil},
		{"tier=", map[string]string{"tier": ""}, []Reason{{SourceLabelSelector, "label tier="}}},
		{"tier=", map[string]string{"tier": "x"}, nil},
		{"a=b=c", map[string]string{"a": "b=c"}, []Reason{{SourceLabelSelector, "label a=b=c"}}},
	}
	for _, tc := range tests {
		t.Run(tc.selector, func(t *testing.T) {
			cfg := emptyConfig()
			cfg.LabelSelectors = []string{tc.selector}
			p, _, _ := newTestPinner(t, cfg)
			assert.DeepEqual(t, evaluateOne(t, p, Image{ID: digA, Labels: tc.labels}), tc.want)
		})
	}
}

func TestLabelSelectorErrors(t *testing.T) {
	for _, sel := range []string{"", " ", "=value", " = x"} {
		_, err := parseLabelSelector(sel)
		assert.ErrorContains(t, err, "invalid pinned image label selector")
		assert.ErrorContains(t, err, "empty label key")
	}
}
