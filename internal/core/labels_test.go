package core

import (
	"testing"

	"gotest.tools/v3/assert"
)

func TestMakeLabels(t *testing.T) {
	for _, tc := range []struct {
		name                string
		labels, annotations map[string]string
		want                map[string]string
	}{
		{name: "empty", want: map[string]string{}},
		{
			name:        "labels verbatim, annotations prefixed",
			labels:      map[string]string{"app": "web", labelPodName: "web-1"},
			annotations: map[string]string{"kubernetes.io/config.seen": "2024", "app": "annotated"},
			want: map[string]string{
				"app": "web", labelPodName: "web-1",
				"annotation.kubernetes.io/config.seen": "2024", "annotation.app": "annotated",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.DeepEqual(t, makeLabels(tc.labels, tc.annotations), tc.want)
		})
	}
}

func TestMakeLabelsDoesNotAliasInput(t *testing.T) {
	in := map[string]string{"a": "1"}
	out := makeLabels(in, nil)
	out[labelContainerType] = typeSandbox
	assert.DeepEqual(t, in, map[string]string{"a": "1"})
}

func TestSplitLabels(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		engine                 map[string]string
		wantLabels, wantAnnots map[string]string
	}{
		{name: "nil", engine: nil, wantLabels: map[string]string{}, wantAnnots: map[string]string{}},
		{
			name: "internal keys stripped",
			engine: map[string]string{
				labelContainerType: typeContainer, labelLogPath: "/var/log/pods/x/c/0.log", labelSandboxID: "abc",
				labelContainerName: "c", "app": "web", "annotation.a": "1", "annotation.": "empty key",
			},
			wantLabels: map[string]string{labelContainerName: "c", "app": "web"},
			wantAnnots: map[string]string{"a": "1", "": "empty key"},
		},
		{
			name:       "only the first annotation prefix goes",
			engine:     map[string]string{"annotation.annotation.x": "y", "annotations.x": "not one"},
			wantLabels: map[string]string{"annotations.x": "not one"},
			wantAnnots: map[string]string{"annotation.x": "y"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			labels, annots := splitLabels(tc.engine)
			assert.DeepEqual(t, labels, tc.wantLabels)
			assert.DeepEqual(t, annots, tc.wantAnnots)
		})
	}
}

func TestLabelsRoundTrip(t *testing.T) {
	labels := map[string]string{"app": "web", labelPodUID: "u", "io.kubernetes.container.restartCount": "0"}
	annots := map[string]string{"kubernetes.io/config.source": "api", "x/y": "", "annotation.nested": "n"}
	engine := makeLabels(labels, annots)
	engine[labelContainerType] = typeContainer
	engine[labelSandboxID] = "sandbox"
	engine[labelLogPath] = "/p"
	gotLabels, gotAnnots := splitLabels(engine)
	assert.DeepEqual(t, gotLabels, labels)
	assert.DeepEqual(t, gotAnnots, annots)
}
