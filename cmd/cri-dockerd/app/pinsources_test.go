package app

import (
	"context"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/dockpin/cri-dockerd/core/docker"
	"github.com/dockpin/cri-dockerd/logctx"
	"github.com/dockpin/cri-dockerd/pinning"
)

func TestContainerdPinsDecision(t *testing.T) {
	log := logctx.Discard()
	missing := t.TempDir() + "/no-containerd.sock"
	ctrdStore := docker.Info{ContainerdStore: true, ContainerdAddress: missing, ContainerdNamespace: "moby"}
	classic := docker.Info{Driver: "overlay2", ContainerdAddress: missing, ContainerdNamespace: "moby"}
	tests := []struct {
		name       string
		mutate     func(*Options)
		info       docker.Info
		wantOn     bool
		wantReason string
	}{
		{name: "off by flag", mutate: func(o *Options) { o.PinFromContainerdLabels = "false" }, info: ctrdStore, wantReason: "turned off"},
		{name: "auto, classic store", info: classic, wantReason: "classic image store"},
		{name: "auto, remote engine", mutate: func(o *Options) { o.DockerEndpoint = "tcp://10.0.0.1:2375" }, info: ctrdStore, wantReason: "remote engine"},
		{name: "auto, socket does not answer yet", info: ctrdStore, wantOn: true}, // its saved state answers meanwhile
		{name: "forced on, socket does not answer yet", mutate: func(o *Options) { o.PinFromContainerdLabels = "true" }, info: ctrdStore, wantOn: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultOptions()
			opts.ContainerdTimeout = 200e6
			if tc.mutate != nil {
				tc.mutate(&opts)
			}
			src, ctrd := containerdPins(context.Background(), &opts, tc.info, log)
			assert.Equal(t, ctrd != nil, tc.wantOn)
			assert.Equal(t, src.Name(), pinning.SourceContainerd)
			st := src.(pinning.StatusReporter).SourceStatus()
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
