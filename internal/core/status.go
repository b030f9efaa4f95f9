package core

import (
	"context"
	"encoding/json"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Status reports runtime and network readiness; verbose adds the effective
// configuration and the pinning state as JSON (`crictl info`).
func (s *Service) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	runtimeReady := &runtimeapi.RuntimeCondition{Type: runtimeapi.RuntimeReady, Status: true}
	if err := s.deps.Docker.Ping(ctx); err != nil {
		runtimeReady.Status = false
		runtimeReady.Reason = "DockerDaemonNotReady"
		runtimeReady.Message = fmt.Sprintf("docker: failed to get docker version: %v", err)
	}
	networkReady := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: true}
	if s.deps.Network != nil { // nil: Docker's bridge, always ready
		if err := s.deps.Network.Status(ctx); err != nil {
			networkReady.Status = false
			networkReady.Reason = "NetworkPluginNotReady"
			networkReady.Message = fmt.Sprintf("docker: network plugin is not ready: %v", err)
		}
	}
	resp := &runtimeapi.StatusResponse{
		Status:          &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{runtimeReady, networkReady}},
		RuntimeHandlers: s.runtimeHandlers(ctx, runtimeReady.Status),
		// The engine cannot keep an image's /etc/group out of a container's groups
		// (supplementalGroupsPolicy Strict), has no user namespaces for pods, and its
		// mounts take no extra options: kubelet refuses pods that need them itself.
		Features: &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: false, UserNamespacesHostNetwork: false, MountOptions: false},
	}
	if req.GetVerbose() {
		parts := map[string]any{"config": s.cfg.Effective, "pinning": s.deps.Pins.Info(), "features": s.features(),
			"checkpoints": s.checkpointStatus(ctx)}
		for k, f := range s.deps.StatusInfo {
			parts[k] = f()
		}
		info, err := statusInfo(parts)
		if err != nil {
			return nil, err
		}
		resp.Info = info
	}
	return resp, nil
}

func statusInfo(parts map[string]any) (map[string]string, error) {
	out := make(map[string]string, len(parts))
	for k, v := range parts {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("status info %s: %w", k, err)
		}
		out[k] = string(raw)
	}
	return out, nil
}

// features is what verbose Status shows of what the engine can run for kubelet.
func (s *Service) features() map[string]bool {
	return map[string]bool{
		"recursiveReadOnlyMounts": s.cfg.RecursiveReadOnlyMounts,
		"userNamespaces":          false,
		"imageVolumes":            s.cfg.ImageVolumes,
		"imageVolumeSubpaths":     s.cfg.ImageVolumeSubpaths,
		"cdiDevices":              true,
	}
}

// runtimeHandlers lists the default handler ("") and each OCI runtime the engine is
// configured with (what RunPodSandbox accepts as a RuntimeClass handler).
func (s *Service) runtimeHandlers(ctx context.Context, engineUp bool) []*runtimeapi.RuntimeHandler {
	// Recursive read-only mounts need API 1.44; the engine runs no pod in a user namespace.
	features := &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: s.cfg.RecursiveReadOnlyMounts, UserNamespaces: false}
	out := []*runtimeapi.RuntimeHandler{{Features: features}}
	if !engineUp {
		return out
	}
	info, err := s.engineInfo(ctx)
	if err != nil {
		s.logger(ctx).WithError(err).Debug("cannot list the engine's runtimes")
		return out
	}
	for _, name := range info.Runtimes {
		out = append(out, &runtimeapi.RuntimeHandler{Name: name, Features: features})
	}
	return out
}
