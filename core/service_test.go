package core

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strconv"
	"testing"

	"github.com/sirupsen/logrus"
	"gotest.tools/v3/assert"

	"github.com/dockpin/cri-dockerd/core/docker"
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

// id returns a valid, distinct-looking image ID made from n.
func id(n int) string {
	sum := sha256.Sum256([]byte(strconv.Itoa(n)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func testImage(n int, tags ...string) docker.Image {
	return docker.Image{ID: id(n), RepoTags: tags, Size: int64(1000 + n)}
}
