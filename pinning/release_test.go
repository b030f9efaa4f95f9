package pinning

import (
	"context"
	"errors"
	"testing"

	"gotest.tools/v3/assert"
)

func TestReleaseClassicHoldsNothing(t *testing.T) {
	out, err := Release(context.Background(), DefaultFlags(), Host{}, &fakeEngine{info: EngineInfo{Driver: "overlay2"}}, nil)
	assert.NilError(t, err)
	assert.DeepEqual(t, out, Released{Store: "classic"})
}

func TestReleaseEngineDown(t *testing.T) {
	_, err := Release(context.Background(), DefaultFlags(), Host{}, &fakeEngine{infoErr: errors.New("connection refused")}, nil)
	assert.ErrorContains(t, err, "engine info: connection refused")
}

func TestReleaseRemoteEngineNeedsAnAddress(t *testing.T) {
	_, err := Release(context.Background(), DefaultFlags(), Host{DockerEndpoint: "tcp://10.0.0.1:2376"},
		&fakeEngine{info: EngineInfo{ContainerdStore: true}}, nil)
	assert.ErrorContains(t, err, "--containerd-address")
}
