package core

import (
	"testing"

	"gotest.tools/v3/assert"

	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
)

// newTestService returns a Service over a fresh fake engine with pins configured by mutate.
func newTestService(t testing.TB, mutate func(*pinner.Config)) (*Service, *dockertest.Fake) {
	t.Helper()
	cfg := pinner.DefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	pins, err := pinner.New(cfg, logctx.Discard())
	assert.NilError(t, err)
	fake := dockertest.New()
	return New(Config{Effective: map[string]string{"k": "v"}}, Deps{Docker: fake, Pins: pins, Log: logctx.Discard()}), fake
}

// id and testImage make test images (see dockertest.Image).
var (
	id        = dockertest.ImageID
	testImage = dockertest.Image
)
