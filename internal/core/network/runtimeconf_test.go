package network

import (
	"encoding/json"
	"testing"

	"gotest.tools/v3/assert"
)

func TestRuntimeConfCapabilities(t *testing.T) {
	base := PodNetwork{Namespace: "ns", Name: "p", SandboxID: "id"}
	tests := []struct {
		name  string
		pn    func(PodNetwork) PodNetwork
		cidrs []string
		want  string
	}{
		{name: "only empty port mappings", pn: func(p PodNetwork) PodNetwork { return p },
			want: `{"portMappings":[]}`},
		{name: "pod CIDR", pn: func(p PodNetwork) PodNetwork { return p }, cidrs: []string{"10.1.0.0/24"},
			want: `{"ipRanges":[[{"subnet":"10.1.0.0/24"}]],"portMappings":[]}`},
		{name: "dual-stack pod CIDR: one range set per family", pn: func(p PodNetwork) PodNetwork { return p },
			cidrs: []string{"10.1.0.0/24", "fd00:1::/64"},
			want:  `{"ipRanges":[[{"subnet":"10.1.0.0/24"}],[{"subnet":"fd00:1::/64"}]],"portMappings":[]}`},
		{name: "egress bandwidth", pn: func(p PodNetwork) PodNetwork { p.Bandwidth = &Bandwidth{EgressRate: 1000}; return p },
			want: `{"bandwidth":{"egressRate":1000,"egressBurst":2147483647},"portMappings":[]}`},
		{name: "zero bandwidth is none", pn: func(p PodNetwork) PodNetwork { p.Bandwidth = &Bandwidth{}; return p },
			want: `{"portMappings":[]}`},
		{name: "dns", pn: func(p PodNetwork) PodNetwork {
			p.DNS = &DNS{Servers: []string{"10.96.0.10"}, Searches: []string{"svc.cluster.local"}, Options: []string{"ndots:5"}}
			return p
		}, want: `{"dns":{"servers":["10.96.0.10"],"searches":["svc.cluster.local"],"options":["ndots:5"]},"portMappings":[]}`},
		{name: "empty dns is none", pn: func(p PodNetwork) PodNetwork { p.DNS = &DNS{}; return p },
			want: `{"portMappings":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := runtimeConf(tt.pn(base), "/ns", tt.cidrs)
			b, err := json.Marshal(rt.CapabilityArgs)
			assert.NilError(t, err)
			assert.Equal(t, string(b), tt.want)
			assert.Equal(t, rt.IfName, "eth0")
			assert.Equal(t, rt.NetNS, "/ns")
			assert.DeepEqual(t, rt.Args, [][2]string{
				{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "ns"}, {"K8S_POD_NAME", "p"}, {"K8S_POD_INFRA_CONTAINER_ID", "id"},
			})
		})
	}
}
