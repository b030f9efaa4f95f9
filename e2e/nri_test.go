//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	nriapi "github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// nriPlugin is a real NRI plugin (containerd's stub library, over our binary's NRI
// socket): it adjusts the container named "adjusted" (an environment variable, a
// read-only bind mount of dataDir, an annotation) and asks an OCI hook for the one
// named "hooked", which Docker Engine cannot run; it records the IDs of the
// containers it is told about.
type nriPlugin struct {
	dataDir string
	ready   chan struct{}
	once    sync.Once

	mu      sync.Mutex
	created []string // CreateContainer
	started []string // StartContainer
}

func (p *nriPlugin) Synchronize(context.Context, []*nriapi.PodSandbox, []*nriapi.Container) ([]*nriapi.ContainerUpdate, error) {
	p.once.Do(func() { close(p.ready) })
	return nil, nil
}

func (p *nriPlugin) CreateContainer(_ context.Context, _ *nriapi.PodSandbox, c *nriapi.Container) (*nriapi.ContainerAdjustment, []*nriapi.ContainerUpdate, error) {
	p.mu.Lock()
	p.created = append(p.created, c.GetId())
	p.mu.Unlock()
	adj := &nriapi.ContainerAdjustment{}
	switch c.GetName() {
	case "adjusted":
		adj.AddEnv("DOCKPIN_NRI", "adjusted")
		adj.AddMount(&nriapi.Mount{Destination: "/nri-data", Source: p.dataDir, Type: "bind", Options: []string{"rbind", "ro"}})
		adj.AddAnnotation("nri.dockpin.test/adjusted", "true")
	case "hooked":
		adj.AddHooks(&nriapi.Hooks{Prestart: []*nriapi.Hook{{Path: "/bin/true"}}})
	}
	return adj, nil, nil
}

func (p *nriPlugin) StartContainer(_ context.Context, _ *nriapi.PodSandbox, c *nriapi.Container) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started = append(p.started, c.GetId())
	return nil
}

func (p *nriPlugin) seen() (created, started []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.created), slices.Clone(p.started)
}

// TestNRIAdjustments runs our binary with --enable-nri and a real plugin connected to
// its socket: the container the plugin adjusts runs on the real engine with the
// plugin's environment variable, mount and annotation, and the plugin knows it by the
// ID CreateContainer answers; an OCI hook, which Docker Engine cannot run, fails
// CreateContainer with FailedPrecondition naming it, and leaves no container.
func TestNRIAdjustments(t *testing.T) {
	pauseImage(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "nri.sock")
	s := startShim(t, "--pod-infra-container-image", pauseRef, "--cri-dockerd-root-directory", filepath.Join(dir, "root"),
		"--enable-nri", "--nri-socket-path", sock, "--nri-plugin-dir", filepath.Join(dir, "plugins"),
		"--nri-plugin-config-dir", filepath.Join(dir, "conf"))

	data := filepath.Join(dir, "data")
	assert.NilError(t, os.MkdirAll(data, 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(data, "marker"), []byte("nri"), 0o644))
	plugin := &nriPlugin{dataDir: data, ready: make(chan struct{})}
	st, err := stub.New(plugin, stub.WithPluginName("dockpin-e2e"), stub.WithPluginIdx("50"), stub.WithSocketPath(sock))
	assert.NilError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- st.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-runDone; err != nil {
			t.Logf("NRI plugin stopped: %v", err)
		}
	})
	select {
	case <-plugin.ready:
	case err := <-runDone:
		t.Fatalf("the NRI plugin stopped before it was synchronised: %v", err)
	}

	pod := podConfig("nri")
	podID := runPod(t, s, pod)
	t.Cleanup(func() { stopAndRemovePod(t, s, podID) })

	cfg := httpdContainer("adjusted", "8080", "")
	cfg.Command = []string{"/pause"}
	id := startContainer(t, s, podID, pod, cfg)
	assert.Check(t, strings.Contains(containerProc(t, id, "environ"), "DOCKPIN_NRI=adjusted\x00"), "no DOCKPIN_NRI in the environment")
	assert.Check(t, strings.Contains(containerProc(t, id, "mountinfo"), " /nri-data ro,"), "no read-only /nri-data mount")
	pid := docker(t, "inspect", "--format", "{{.State.Pid}}", id)
	marker, err := os.ReadFile(filepath.Join("/proc", pid, "root", "nri-data", "marker"))
	assert.NilError(t, err)
	assert.Check(t, string(marker) == "nri")
	cs, err := s.rt.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	assert.NilError(t, err)
	assert.Check(t, cs.GetStatus().GetAnnotations()["nri.dockpin.test/adjusted"] == "true", "%v", cs.GetStatus().GetAnnotations())
	created, started := plugin.seen()
	assert.Check(t, slices.Contains(created, id), "the plugin was not asked about %s (it saw %v)", id, created)
	assert.Check(t, slices.Equal(started, []string{id}), "started %v", started)

	hooked := httpdContainer("hooked", "8080", "")
	hooked.Command = []string{"/pause"}
	_, err = s.rt.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: podID, Config: hooked, SandboxConfig: pod})
	t.Logf("an OCI hook: %v", err)
	assert.Check(t, status.Code(err) == codes.FailedPrecondition, "code %v", status.Code(err))
	assert.Check(t, strings.Contains(status.Convert(err).Message(), "hooks (Docker Engine runs no OCI hooks)"), status.Convert(err).Message())
	left := docker(t, "ps", "-aq", "--filter", "label=io.kubernetes.sandbox.id="+podID, "--filter", "name=k8s_hooked_")
	assert.Check(t, left == "", "the refused container was left: %s", left)
}
