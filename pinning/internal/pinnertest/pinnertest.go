// Package pinnertest builds Pinners for the tests of the packages that work over one
// (preload, sticky, containerd and the pinning facade).
package pinnertest

import (
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"gotest.tools/v3/assert"

	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
)

// EmptyConfig pins nothing: no sandbox image, no config labels.
func EmptyConfig() pinner.Config {
	cfg := pinner.DefaultConfig()
	cfg.SandboxImage = ""
	cfg.ConfigLabels = false
	return cfg
}

// New builds a Pinner of cfg and sources that logs into the returned hook.
func New(t testing.TB, cfg pinner.Config, sources ...pin.Source) (*pinner.Pinner, *logtest.Hook) {
	t.Helper()
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	p, err := pinner.New(cfg, log, sources...)
	assert.NilError(t, err)
	return p, hook
}
