package core

import (
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

func TestCreateContainerBoundsEngineLog(t *testing.T) {
	bounded := &docker.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "10m", "max-file": "2"}}
	tests := []struct {
		name    string
		driver  string
		limits  EngineLogLimits
		logPath string
		noLogs  bool
		want    *docker.LogConfig
	}{
		{name: "json-file", driver: "json-file", limits: EngineLogLimits{MaxSize: "10m", MaxFiles: 2}, logPath: "app/0.log", want: bounded},
		{name: "local", driver: "local", limits: EngineLogLimits{MaxSize: "1m", MaxFiles: 3}, logPath: "app/0.log",
			want: &docker.LogConfig{Type: "local", Config: map[string]string{"max-size": "1m", "max-file": "3"}}},
		{name: "a driver without max-size keeps its configuration", driver: "journald", limits: EngineLogLimits{MaxSize: "10m", MaxFiles: 2}, logPath: "app/0.log"},
		{name: "limits off", driver: "json-file", logPath: "app/0.log"},
		{name: "no CRI log file: the engine's is the only copy", driver: "json-file", limits: EngineLogLimits{MaxSize: "10m", MaxFiles: 2}},
		{name: "no log copier", driver: "json-file", limits: EngineLogLimits{MaxSize: "10m", MaxFiles: 2}, logPath: "app/0.log", noLogs: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newRTEnv(t)
			info, err := env.engine.Info(t.Context())
			assert.NilError(t, err)
			info.LoggingDriver = tc.driver
			env.engine.SetInfo(info)
			env.svc.cfg.EngineLog = tc.limits
			if tc.noLogs {
				env.svc.deps.Logs = nil
			}
			sbCfg := rtSandboxConfig("web")
			sbID := env.runSandbox(t, sbCfg)
			cfg := rtContainerConfig("app")
			cfg.LogPath = tc.logPath
			cid := env.createContainer(t, sbID, sbCfg, cfg)
			assert.Check(t, is.DeepEqual(env.spec(t, cid).LogConfig, tc.want))
		})
	}
}
