package pinner

import (
	"testing"

	"github.com/dockpin/cri-dockerd/pinning/internal/pintest"
	"github.com/dockpin/cri-dockerd/pinning/pin"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"gotest.tools/v3/assert"
)

// emptyConfig pins nothing: no sandbox image, no config labels.
func emptyConfig() Config {
	cfg := DefaultConfig()
	cfg.SandboxImage = ""
	cfg.ConfigLabels = false
	return cfg
}

// newTestPinner builds a Pinner with a fake clock and a log hook.
func newTestPinner(t testing.TB, cfg Config, sources ...pin.Source) (*Pinner, *pintest.FakeClock, *logtest.Hook) {
	t.Helper()
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	p, err := New(cfg, log, sources...)
	assert.NilError(t, err)
	clock := pintest.NewFakeClock()
	p.now = clock.Now
	return p, clock, hook
}
