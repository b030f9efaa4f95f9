package core

import (
	"context"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
)

// TestEngineInfoIsReused: creating containers does not ask the engine for its /info
// each time (it is computed from scratch, tens of milliseconds); a failed /info is
// not remembered.
func TestEngineInfoIsReused(t *testing.T) {
	env := newRTEnv(t)
	sbID, sbCfg := env.webSandbox(t)
	before := env.engine.Calls("Info")
	for _, name := range []string{"a", "b", "c"} {
		env.createContainer(t, sbID, sbCfg, rtContainerConfig(name))
	}
	assert.Check(t, env.engine.Calls("Info")-before <= 1, "Info called %d times for 3 containers", env.engine.Calls("Info")-before)

	fresh := newRTEnv(t)
	fresh.engine.InjectError("Info", cerrdefs.ErrUnavailable)
	_, err := fresh.svc.engineInfo(context.Background())
	assert.Check(t, cerrdefs.IsUnavailable(err))
	fresh.engine.InjectError("Info", nil)
	_, err = fresh.svc.engineInfo(context.Background())
	assert.NilError(t, err, "an error is not remembered")
}
