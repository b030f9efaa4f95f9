package core

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/checkpoint"
	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// Docker namespace modes.
const (
	modeHost      = "host"
	modeNone      = "none"
	modeDefault   = "default"
	modeShareable = "shareable"
	modeContainer = "container:"

	// sandboxOomScoreAdj is the pause container's OOM score, as upstream and kubelet's
	// qos.PodInfraOOMAdj.
	sandboxOomScoreAdj = -998
	// sandboxCPUShares is the pause container's CPU weight, as upstream.
	sandboxCPUShares = 2
)

// sandboxInspect returns the sandbox container id, NotFound when there is no
// container or it is not a sandbox.
func (s *Service) sandboxInspect(ctx context.Context, id string) (docker.ContainerDetails, error) {
	return s.inspectTyped(ctx, id, typeSandbox, "pod sandbox", "sandbox")
}

// hostNetwork tells whether the sandbox config asks for the node's network namespace.
func hostNetwork(cfg *runtimeapi.PodSandboxConfig) bool {
	return cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
}

// cgroupParent converts a CRI cgroup parent for the engine: with the systemd driver
// the engine wants a slice name ("kubepods-burstable-pod1.slice"), not a path.
func cgroupParent(driver, parent string) (string, error) {
	if parent == "" || driver != "systemd" {
		return parent, nil
	}
	base := path.Base(parent)
	if !strings.HasSuffix(base, ".slice") {
		return "", fmt.Errorf("cgroup parent %q is not a systemd slice, but the engine uses the systemd cgroup driver: %w",
			parent, cerrdefs.ErrInvalidArgument)
	}
	return base, nil
}

// sandboxCheckpoint is the checkpoint RunPodSandbox writes: upstream's content, so
// that upstream reads ours and we read upstream's.
func sandboxCheckpoint(cfg *runtimeapi.PodSandboxConfig) *checkpoint.Checkpoint {
	data := &checkpoint.Data{HostNetwork: hostNetwork(cfg)}
	for _, pm := range cfg.GetPortMappings() { // all of them, host port 0 too, as upstream
		proto := checkpoint.Protocol(protocolName(pm.GetProtocol()))
		cport, hport := pm.GetContainerPort(), pm.GetHostPort()
		data.PortMappings = append(data.PortMappings, &checkpoint.PortMapping{
			Protocol: &proto, ContainerPort: &cport, HostPort: &hport, HostIP: pm.GetHostIp(),
		})
	}
	return checkpoint.New(cfg.GetMetadata().GetName(), cfg.GetMetadata().GetNamespace(), data)
}

// readCheckpoint returns a sandbox's checkpoint; nil without error when there is none.
// A corrupt checkpoint is an error wrapping DataLoss.
func (s *Service) readCheckpoint(id string) (*checkpoint.Checkpoint, error) {
	cp, err := s.deps.Checkpoints.Read(id)
	if cerrdefs.IsNotFound(err) {
		return nil, nil
	}
	return cp, err
}

// stateOfSandbox maps the engine state to the CRI's.
func stateOfSandbox(state string) runtimeapi.PodSandboxState {
	if state == docker.StateRunning {
		return runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return runtimeapi.PodSandboxState_SANDBOX_NOTREADY
}

// sandboxMetadata rebuilds a sandbox's CRI metadata from its engine name and labels.
func sandboxMetadata(c docker.Container) (*runtimeapi.PodSandboxMetadata, error) {
	n, err := parseName(c.Name)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PodSandboxMetadata{Name: n.pod, Namespace: n.namespace, Uid: n.uid, Attempt: n.attempt}, nil
}

// namespaceMode maps an engine namespace mode to the CRI's.
func namespaceMode(mode string) runtimeapi.NamespaceMode {
	switch {
	case mode == modeHost:
		return runtimeapi.NamespaceMode_NODE
	case mode == "" || mode == modeShareable || mode == "private":
		return runtimeapi.NamespaceMode_POD
	case strings.HasPrefix(mode, modeContainer):
		return runtimeapi.NamespaceMode_POD
	}
	return runtimeapi.NamespaceMode_POD
}

// ignoreNotFound returns nil for NotFound errors.
func ignoreNotFound(err error) error {
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// joinErrs joins errors, nil when all are nil.
func joinErrs(errs ...error) error { return errors.Join(errs...) }

// concurrently runs every step at once and returns, when all are done, their errors
// joined.
func concurrently(steps ...func() error) error {
	if len(steps) == 1 {
		return steps[0]()
	}
	errs := make([]error, len(steps))
	var wg sync.WaitGroup
	for i, step := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = step()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
