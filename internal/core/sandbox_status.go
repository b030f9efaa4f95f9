package core

import (
	"context"
	"encoding/json"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// PodSandboxStatus reports a sandbox's state, IPs and namespaces; NotFound when the
// engine has no such sandbox.
func (s *Service) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	sb, err := s.sandboxInspect(ctx, req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	if s.hidden(sb.ID) {
		return nil, fmt.Errorf("pod sandbox %q not found (its NRI plugins have not run it yet): %w", req.GetPodSandboxId(), cerrdefs.ErrNotFound)
	}
	md, err := sandboxMetadata(sb.Container)
	if err != nil {
		return nil, err
	}
	labels, annotations := splitLabels(sb.Labels)
	st := &runtimeapi.PodSandboxStatus{
		Id:          sb.ID,
		Metadata:    md,
		State:       stateOfSandbox(sb.State),
		CreatedAt:   sb.Created.UnixNano(),
		Labels:      labels,
		Annotations: annotations,
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{
			Network: namespaceMode(sb.NetworkMode),
			Pid:     sandboxPidMode(sb.PidMode),
			Ipc:     namespaceMode(sb.IpcMode),
		}}},
	}
	ips, err := s.sandboxIPs(ctx, sb)
	if err != nil {
		// kubelet keeps going without IPs; an error here would block the pod's cleanup.
		s.logger(ctx).WithError(err).WithField("sandbox", sb.ID).Warn("cannot read pod sandbox IPs")
	}
	if sb.NetworkMode != modeHost {
		// Always set for a pod network, empty when there is no IP: kubelet replaces a
		// sandbox whose network status has an empty IP (say, the network was never set
		// up because we died half-way), but not one without a network status.
		st.Network = &runtimeapi.PodSandboxNetworkStatus{}
		if len(ips) > 0 {
			st.Network.Ip = ips[0]
		}
		for _, ip := range ips[min(len(ips), 1):] {
			st.Network.AdditionalIps = append(st.Network.AdditionalIps, &runtimeapi.PodIP{Ip: ip})
		}
	}
	st.RuntimeHandler = sb.Runtime
	// No Timestamp: with its EventedPLEG gate on, kubelet takes a response with one as
	// carrying the statuses of all the pod's containers (ContainersStatuses) and, given
	// none, sees a pod without containers and creates them again, every sync: duplicate
	// containers. Without one it asks for the containers' statuses itself, as containerd
	// 2.x lets it.
	resp := &runtimeapi.PodSandboxStatusResponse{Status: st}
	if req.GetVerbose() {
		info, err := json.Marshal(map[string]any{
			"pid": sb.Pid, "image": sb.Image, "networkMode": sb.NetworkMode, "pidMode": sb.PidMode,
			"ipcMode": sb.IpcMode, "hostname": sb.Hostname, "resolvConfPath": sb.ResolvConfPath,
			"startedAt": sb.StartedAt, "finishedAt": sb.FinishedAt, "exitCode": sb.ExitCode,
		})
		if err != nil {
			return nil, fmt.Errorf("verbose info of pod sandbox %s: %w", sb.ID, err)
		}
		resp.Info = map[string]string{"info": string(info)}
	}
	return resp, nil
}

// sandboxIPs returns a ready sandbox's IPs, primary first: from CNI's cached result,
// or from the engine's network with Docker's bridge. A host-network or stopped
// sandbox has none (kubelet uses the node's IPs for host-network pods).
func (s *Service) sandboxIPs(ctx context.Context, sb docker.ContainerDetails) ([]string, error) {
	if sb.State != docker.StateRunning || sb.NetworkMode == modeHost {
		return nil, nil
	}
	if s.deps.Network == nil {
		var ips []string
		for _, ip := range []string{sb.IPAddress, sb.IPv6Address} {
			if ip != "" {
				ips = append(ips, ip)
			}
		}
		return ips, nil
	}
	return s.networkIPs(ctx, sb.ID)
}

// sandboxPidMode reports a sandbox's PID namespace as upstream: the node's, or the
// pause container's own (containers choose whether to join it).
func sandboxPidMode(mode string) runtimeapi.NamespaceMode {
	if mode == modeHost {
		return runtimeapi.NamespaceMode_NODE
	}
	return runtimeapi.NamespaceMode_CONTAINER
}
