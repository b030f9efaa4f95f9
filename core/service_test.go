package core

import (
	"io"
	"testing"

	"github.com/sirupsen/logrus"
	"gotest.tools/v3/assert"

	"github.com/dockpin/cri-dockerd/core/docker/dockertest"
	"github.com/dockpin/cri-dockerd/pinning"
)

func quietLogger() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// newTestService returns a Service over a fresh fake engine with pins configured by mutate.
func newTestService(t testing.TB, mutate func(*pinning.Config)) (*Service, *dockertest.Fake) {
	t.Helper()
	cfg := pinning.DefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	pins, err := pinning.New(cfg, quietLogger())
	assert.NilError(t, err)
	fake := dockertest.New()
	return New(Config{Effective: map[string]string{"k": "v"}}, Deps{Docker: fake, Pins: pins, Log: quietLogger()}), fake
}

// id and testImage make test images (see dockertest.Image).
var (
	id        = dockertest.ImageID
	testImage = dockertest.Image
)
