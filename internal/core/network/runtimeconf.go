package network

import (
	"math"
	"strings"

	"github.com/containernetworking/cni/libcni"
)

// The capabilities (CNI CONVENTIONS.md) whose arguments the runtime passes; libcni
// gives each plugin only those it declares in its "capabilities".
const (
	capPortMappings = "portMappings"
	capIPRanges     = "ipRanges"
	capBandwidth    = "bandwidth"
	capDNS          = "dns"
)

// cniPortMapping is one entry of the portMappings capability.
type cniPortMapping struct {
	HostPort      int32  `json:"hostPort"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// cniBandwidth is the bandwidth capability: rates in bits per second, bursts in bits.
type cniBandwidth struct {
	IngressRate  uint64 `json:"ingressRate,omitempty"`
	IngressBurst uint64 `json:"ingressBurst,omitempty"`
	EgressRate   uint64 `json:"egressRate,omitempty"`
	EgressBurst  uint64 `json:"egressBurst,omitempty"`
}

// cniIPRange is one range of the ipRanges capability.
type cniIPRange struct {
	Subnet string `json:"subnet"`
}

// cniDNS is the dns capability.
type cniDNS struct {
	Servers  []string `json:"servers,omitempty"`
	Searches []string `json:"searches,omitempty"`
	Options  []string `json:"options,omitempty"`
}

// unlimitedBurst is the burst passed with every rate. Kubernetes' annotations have no
// burst; like upstream we pass math.MaxInt32 bits (about 2 Gbit), which in practice does
// not limit bursts.
const unlimitedBurst = math.MaxInt32

// cniArgs are the CNI_ARGS of every invocation, as kubelet's CNI plugin sent them (plus
// K8S_POD_UID, as containerd and CRI-O send it); IgnoreUnknown lets plugins that do not
// know a key accept them.
func cniArgs(pn PodNetwork) [][2]string {
	args := [][2]string{
		{"IgnoreUnknown", "1"},
		{"K8S_POD_NAMESPACE", pn.Namespace},
		{"K8S_POD_NAME", pn.Name},
		{"K8S_POD_INFRA_CONTAINER_ID", pn.SandboxID},
	}
	if pn.UID != "" {
		args = append(args, [2]string{"K8S_POD_UID", pn.UID})
	}
	return args
}

// runtimeConf builds the runtime configuration of the pod interface: CNI_ARGS and the
// capability arguments. portMappings is always present (possibly empty) and skips
// mappings without a host port; bandwidth only with a rate; ipRanges only with pod CIDRs,
// one range set per CIDR (one per address family); dns only when given.
func runtimeConf(pn PodNetwork, netns string, podCIDRs []string) *libcni.RuntimeConf {
	pms := make([]cniPortMapping, 0, len(pn.PortMappings))
	for _, p := range pn.PortMappings {
		if p.HostPort <= 0 {
			continue
		}
		proto := strings.ToLower(p.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		pms = append(pms, cniPortMapping{HostPort: p.HostPort, ContainerPort: p.ContainerPort, Protocol: proto, HostIP: p.HostIP})
	}
	caps := map[string]any{capPortMappings: pms}

	if bw := pn.Bandwidth; bw != nil && (bw.IngressRate > 0 || bw.EgressRate > 0) {
		var c cniBandwidth
		if bw.IngressRate > 0 {
			c.IngressRate, c.IngressBurst = bw.IngressRate, unlimitedBurst
		}
		if bw.EgressRate > 0 {
			c.EgressRate, c.EgressBurst = bw.EgressRate, unlimitedBurst
		}
		caps[capBandwidth] = c
	}

	if len(podCIDRs) > 0 {
		ranges := make([][]cniIPRange, 0, len(podCIDRs))
		for _, c := range podCIDRs {
			ranges = append(ranges, []cniIPRange{{Subnet: c}})
		}
		caps[capIPRanges] = ranges
	}

	if d := pn.DNS; d != nil && (len(d.Servers) > 0 || len(d.Searches) > 0 || len(d.Options) > 0) {
		caps[capDNS] = cniDNS{Servers: d.Servers, Searches: d.Searches, Options: d.Options}
	}

	return &libcni.RuntimeConf{
		ContainerID:    pn.SandboxID,
		NetNS:          netns,
		IfName:         PodInterface,
		Args:           cniArgs(pn),
		CapabilityArgs: caps,
	}
}
