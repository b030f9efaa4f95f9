package network

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/invoke"

	"github.com/dockpin/cri-dockerd/internal/logctx"
)

// timedExec runs CNI plugins as libcni does by default and times each run as a
// phase of the request (logctx.Time), named "cni.<plugin>.<command>"
// (cni.bridge.add, cni.loopback.del).
type timedExec struct {
	invoke.Exec
}

func newTimedExec() timedExec {
	return timedExec{Exec: &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}}}
}

func (e timedExec) ExecPlugin(ctx context.Context, pluginPath string, stdin []byte, environ []string) ([]byte, error) {
	defer logctx.Time(ctx, cniPhase(pluginPath, environ))()
	return e.Exec.ExecPlugin(ctx, pluginPath, stdin, environ)
}

// cniPhase names the run of the plugin at pluginPath with environ's CNI_COMMAND.
func cniPhase(pluginPath string, environ []string) string {
	cmd := "run"
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "CNI_COMMAND="); ok {
			cmd = strings.ToLower(v)
		}
	}
	return "cni." + filepath.Base(pluginPath) + "." + cmd
}
