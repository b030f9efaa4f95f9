package core

import (
	"context"
	"os"
	"strconv"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/checkpoint"
	"github.com/dockpin/cri-dockerd/internal/core/network"
)

// netnsPath is the network namespace of a running sandbox's pause process.
func netnsPath(pid int) string {
	if pid <= 0 {
		return ""
	}
	return "/proc/" + strconv.Itoa(pid) + "/ns/net"
}

// holdNetns opens the network namespace of the running pause process pid and returns
// a path to it that names that namespace until release is called, also once the pause
// process is gone: /proc/<our pid>/fd/<fd>. A teardown given this path can run while
// the pause container stops, and never names another process's namespace (a reused
// PID). Without a namespace to open (the process is gone) the path is "".
func holdNetns(pid int) (path string, release func()) {
	if pid <= 0 {
		return "", func() {}
	}
	f, err := os.Open(netnsPath(pid))
	if err != nil {
		return "", func() {}
	}
	return "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.FormatUint(uint64(f.Fd()), 10), func() { _ = f.Close() }
}

// podNetwork describes a sandbox's attachment, in the network namespace netns, for
// the network plugin.
func podNetwork(id, netns string, md *runtimeapi.PodSandboxMetadata, ports []network.PortMapping) network.PodNetwork {
	return network.PodNetwork{
		Namespace: md.GetNamespace(), Name: md.GetName(), UID: md.GetUid(),
		SandboxID: id, NetNS: netns, PortMappings: ports,
	}
}

// protocolName is a CRI protocol as the engine, the CNI plugins and checkpoints
// write it: "tcp", "udp", "sctp".
func protocolName(p runtimeapi.Protocol) string {
	return strings.ToLower(p.String())
}

// criPorts converts a sandbox config's port mappings for the network plugin.
func criPorts(pms []*runtimeapi.PortMapping) []network.PortMapping {
	var out []network.PortMapping
	for _, pm := range pms {
		out = append(out, network.PortMapping{
			HostPort: pm.GetHostPort(), ContainerPort: pm.GetContainerPort(),
			Protocol: protocolName(pm.GetProtocol()), HostIP: pm.GetHostIp(),
		})
	}
	return out
}

// checkpointPorts converts the port mappings kept in a checkpoint for the network
// plugin. Fields an upstream checkpoint leaves out are zero (protocol: tcp, the
// CRI's default); null entries are skipped.
func checkpointPorts(cp *checkpoint.Checkpoint) []network.PortMapping {
	var out []network.PortMapping
	for _, pm := range cp.Data.PortMappings {
		if pm == nil {
			continue
		}
		m := network.PortMapping{HostIP: pm.HostIP, Protocol: protocolName(runtimeapi.Protocol_TCP)}
		if pm.ContainerPort != nil {
			m.ContainerPort = *pm.ContainerPort
		}
		if pm.HostPort != nil {
			m.HostPort = *pm.HostPort
		}
		if pm.Protocol != nil && *pm.Protocol != "" {
			m.Protocol = string(*pm.Protocol)
		}
		out = append(out, m)
	}
	return out
}

// setUpNetwork attaches a started sandbox to the pod network.
func (s *Service) setUpNetwork(ctx context.Context, id string, pid int, cfg *runtimeapi.PodSandboxConfig) (network.Result, error) {
	pn := podNetwork(id, netnsPath(pid), cfg.GetMetadata(), criPorts(cfg.GetPortMappings()))
	if dns := cfg.GetDnsConfig(); dns != nil {
		pn.DNS = &network.DNS{Servers: dns.GetServers(), Searches: dns.GetSearches(), Options: dns.GetOptions()}
	}
	bw, err := network.BandwidthFromAnnotations(cfg.GetAnnotations())
	if err != nil {
		return network.Result{}, err
	}
	pn.Bandwidth = bw
	return s.deps.Network.SetUp(ctx, pn)
}

// tearDownNetwork detaches a sandbox from the pod network; netns "" means its network
// namespace is gone, and the plugins only release what they allocated.
func (s *Service) tearDownNetwork(ctx context.Context, id, netns string, md *runtimeapi.PodSandboxMetadata, ports []network.PortMapping) error {
	return s.deps.Network.TearDown(ctx, podNetwork(id, netns, md, ports))
}

// networkIPs returns the IPs the network plugin gave a running sandbox.
func (s *Service) networkIPs(ctx context.Context, id string) ([]string, error) {
	res, err := s.deps.Network.PodNetworkStatus(ctx, id)
	if err != nil {
		return nil, err
	}
	ips := make([]string, 0, len(res.IPs))
	for _, ip := range res.IPs {
		ips = append(ips, ip.String())
	}
	return ips, nil
}

// networkReleased tells that this process tore down the network of sandbox id and
// nothing is attached to it since.
func (s *Service) networkReleased(id string) bool {
	return s.deps.Network != nil && s.tornDown.has(id) && !s.deps.Network.Attached(id)
}
