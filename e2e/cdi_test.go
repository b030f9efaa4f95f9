//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// bridgePod runs a pod on the engine's own bridge (no CNI) through a fresh shim.
func bridgePod(t *testing.T, name string) (*shim, *runtimeapi.PodSandboxConfig, string) {
	t.Helper()
	pauseImage(t)
	s := startShim(t, "--pod-infra-container-image", pauseRef, "--cri-dockerd-root-directory", filepath.Join(t.TempDir(), "root"))
	pod := podConfig(name)
	podID := runPod(t, s, pod)
	t.Cleanup(func() { stopAndRemovePod(t, s, podID) })
	return s, pod, podID
}

// containerProc reads file (under /proc/<pid>/) of the running container id's main process.
func containerProc(t *testing.T, id, file string) string {
	t.Helper()
	pid := docker(t, "inspect", "--format", "{{.State.Pid}}", id)
	b, err := os.ReadFile(filepath.Join("/proc", pid, file))
	assert.NilError(t, err)
	return string(b)
}

// TestCDIDevices writes a CDI spec with a fake device into the engine's CDI directory
// (hack/engine.sh): a container asking for it, by cdi_devices or by its name among the
// devices, gets the device's environment variable and mount; an unknown device fails
// CreateContainer with the engine's reason.
func TestCDIDevices(t *testing.T) {
	data := t.TempDir()
	assert.NilError(t, os.WriteFile(filepath.Join(data, "marker"), []byte("cdi"), 0o644))
	kind := "dockpin.test/fake"
	spec := fmt.Sprintf(`{"cdiVersion": "0.6.0", "kind": %q, "devices": [
  {"name": "one", "containerEdits": {"env": ["DOCKPIN_CDI=one"]}},
  {"name": "two", "containerEdits": {"env": ["DOCKPIN_CDI=two"]}}],
 "containerEdits": {"mounts": [{"hostPath": %q, "containerPath": "/cdi-data", "options": ["ro", "bind"]}]}}`, kind, data)
	specFile := filepath.Join(env.stackDir, "cdi", "dockpin-fake.json")
	assert.NilError(t, os.MkdirAll(filepath.Dir(specFile), 0o755))
	assert.NilError(t, os.WriteFile(specFile, []byte(spec), 0o644))
	t.Cleanup(func() { _ = os.Remove(specFile) })

	s, pod, podID := bridgePod(t, "cdi")
	for _, tc := range []struct {
		name, want string
		mutate     func(*runtimeapi.ContainerConfig)
	}{
		{"cdi-devices", "one", func(c *runtimeapi.ContainerConfig) {
			c.CDIDevices = []*runtimeapi.CDIDevice{{Name: kind + "=one"}}
		}},
		{"devices", "two", func(c *runtimeapi.ContainerConfig) {
			c.Devices = []*runtimeapi.Device{{HostPath: kind + "=two"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := httpdContainer(tc.name, "8080", "")
			cfg.Command = []string{"/pause"}
			tc.mutate(cfg)
			id := startContainer(t, s, podID, pod, cfg)
			assert.Check(t, strings.Contains(containerProc(t, id, "environ"), "DOCKPIN_CDI="+tc.want+"\x00"))
			assert.Check(t, strings.Contains(containerProc(t, id, "mountinfo"), " /cdi-data ro,"), "no read-only /cdi-data mount")
		})
	}

	cfg := httpdContainer("unknown", "8080", "")
	cfg.CDIDevices = []*runtimeapi.CDIDevice{{Name: kind + "=nothere"}}
	_, err := s.rt.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: podID, Config: cfg, SandboxConfig: pod})
	assert.Assert(t, err != nil, "an unknown CDI device was accepted")
	st, _ := status.FromError(err)
	t.Logf("unknown CDI device: %v", err)
	assert.Check(t, st.Code() == codes.InvalidArgument || st.Code() == codes.NotFound || st.Code() == codes.FailedPrecondition, "code %v", st.Code())
	assert.Check(t, strings.Contains(st.Message(), kind+"=nothere"), st.Message())
}
