package pinning

import (
	"context"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/pin"
)

func TestContainerdPinsDecision(t *testing.T) {
	log := logctx.Discard()
	missing := t.TempDir() + "/no-containerd.sock"
	ctrdInfo := EngineInfo{ContainerdStore: true, ContainerdAddress: missing, ContainerdNamespace: "moby"}
	classic := EngineInfo{Driver: "overlay2", ContainerdAddress: missing, ContainerdNamespace: "moby"}
	const local = "unix:///var/run/docker.sock"
	tests := []struct {
		name       string
		mutate     func(*Flags)
		endpoint   string
		info       EngineInfo
		wantOn     bool
		wantReason string
	}{
		{name: "off by flag", mutate: func(f *Flags) { f.PinFromContainerdLabels = "false" }, info: ctrdInfo, wantReason: "turned off"},
		{name: "auto, classic store", info: classic, wantReason: "classic image store"},
		{name: "auto, remote engine", endpoint: "tcp://10.0.0.1:2375", info: ctrdInfo, wantReason: "remote engine"},
		{name: "auto, socket does not answer yet", info: ctrdInfo, wantOn: true}, // its saved state answers meanwhile
		{name: "forced on, socket does not answer yet", mutate: func(f *Flags) { f.PinFromContainerdLabels = "true" }, info: ctrdInfo, wantOn: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := DefaultFlags()
			f.ContainerdTimeout = 200e6
			if tc.mutate != nil {
				tc.mutate(&f)
			}
			endpoint := tc.endpoint
			if endpoint == "" {
				endpoint = local
			}
			src, ctrd := containerdPins(context.Background(), &f, endpoint, tc.info, log)
			assert.Equal(t, ctrd != nil, tc.wantOn)
			assert.Equal(t, src.Name(), pin.SourceContainerd)
			st := src.(pin.StatusReporter).SourceStatus()
			assert.Equal(t, st["enabled"], tc.wantOn)
			if !tc.wantOn {
				assert.Check(t, is.Contains(st["reason"], tc.wantReason))
				return
			}
			assert.Equal(t, st["address"], missing)
			assert.Equal(t, st["namespace"], "moby")
			_ = ctrd.Close()
		})
	}
}

func TestContainerdAddress(t *testing.T) {
	assert.Equal(t, containerdAddress("/flag.sock", "/info.sock"), "/flag.sock")
	assert.Equal(t, containerdAddress("", "/info.sock"), "/info.sock")
}

func TestUsesContainerdStore(t *testing.T) {
	assert.Check(t, UsesContainerdStore([][2]string{{"Backing Filesystem", "extfs"}, {"driver-type", ContainerdSnapshotterDriverType}}))
	assert.Check(t, !UsesContainerdStore([][2]string{{"Backing Filesystem", "extfs"}, {"Supports d_type", "true"}}))
	assert.Check(t, !UsesContainerdStore(nil))
}
