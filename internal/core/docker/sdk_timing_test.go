package docker

import (
	"context"
	"net/http"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/dockpin/cri-dockerd/internal/logctx"
)

func TestEnginePhase(t *testing.T) {
	tests := []struct{ method, path, want string }{
		{http.MethodPost, "/v1.51/containers/create", "engine.containers.create"},
		{http.MethodGet, "/v1.51/containers/json", "engine.containers.list"},
		{http.MethodGet, "/v1.51/containers/abc/json", "engine.containers.inspect"},
		{http.MethodPost, "/v1.51/containers/abc/start", "engine.containers.start"},
		{http.MethodDelete, "/v1.51/containers/abc", "engine.containers.delete"},
		{http.MethodGet, "/v1.51/images/registry.k8s.io/pause:3.10/json", "engine.images.inspect"},
		{http.MethodDelete, "/v1.51/images/registry.k8s.io/pause:3.10", "engine.images.delete"},
		{http.MethodGet, "/v1.51/info", "engine.info"},
		{http.MethodHead, "/_ping", "engine._ping"},
		{http.MethodPost, "/v1.51/exec/abc/start", "engine.exec.start"},
	}
	for _, tc := range tests {
		assert.Check(t, enginePhase(tc.method, tc.path) == tc.want, "%s %s: %s", tc.method, tc.path, enginePhase(tc.method, tc.path))
	}
}

func TestEngineCallsAreRequestPhases(t *testing.T) {
	c := engineAnswering(t, http.StatusOK, "")
	ctx, phases := logctx.WithPhases(context.Background())
	_, _ = c.Info(ctx)
	_, ok := phases.Fields()["t.engine.info"]
	assert.Check(t, ok, "phases: %v", phases.Fields())
}
