package core

import (
	"fmt"
	"os"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/network"
)

func TestRunPodSandboxResolvConf(t *testing.T) {
	for _, tc := range []struct {
		name string
		dns  *runtimeapi.DNSConfig
		host bool
		want string // "" = untouched
	}{
		{name: "nil"},
		{name: "empty", dns: &runtimeapi.DNSConfig{}},
		{
			name: "full",
			dns: &runtimeapi.DNSConfig{
				Servers:  []string{"10.96.0.10", "fd00::a"},
				Searches: []string{"default.svc.cluster.local", "svc.cluster.local"},
				Options:  []string{"ndots:5", "timeout:1"},
			},
			want: "nameserver 10.96.0.10\nnameserver fd00::a\nsearch default.svc.cluster.local svc.cluster.local\noptions ndots:5 timeout:1\n",
		},
		{name: "servers only", dns: &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}}, want: "nameserver 1.1.1.1\n"},
		{name: "host network", host: true, dns: &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}}, want: "nameserver 1.1.1.1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newRTEnv(t)
			cfg := rtSandboxConfig("web")
			cfg.DnsConfig = tc.dns
			if tc.host {
				rtHostNetwork(cfg)
			}
			sbID := env.runSandbox(t, cfg)
			path := env.inspect(t, sbID).ResolvConfPath
			assert.Check(t, is.Contains(path, env.dockerRoot))
			b, err := os.ReadFile(path)
			if tc.want == "" {
				assert.Check(t, os.IsNotExist(err), "resolv.conf written: %q, %v", b, err)
				return
			}
			assert.NilError(t, err)
			assert.Equal(t, string(b), tc.want)
		})
	}
}

func TestRunPodSandboxNetworkSetUp(t *testing.T) {
	env := newRTEnv(t)
	cfg := rtSandboxConfig("web")
	cfg.PortMappings = append(rtPorts(), &runtimeapi.PortMapping{Protocol: runtimeapi.Protocol_UDP, ContainerPort: 53, HostPort: 5353, HostIp: "127.0.0.1"})
	cfg.Annotations[network.IngressBandwidthAnnotation] = "10M"
	cfg.Annotations[network.EgressBandwidthAnnotation] = "1M"
	cfg.DnsConfig = &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"svc"}, Options: []string{"ndots:5"}}
	sbID := env.runSandbox(t, cfg)

	pid := env.inspect(t, sbID).Pid
	assert.Assert(t, pid > 0)
	want := network.PodNetwork{
		Namespace: "default", Name: "web", UID: "web-uid", SandboxID: sbID,
		NetNS: fmt.Sprintf("/proc/%d/ns/net", pid),
		PortMappings: []network.PortMapping{
			{Protocol: "tcp", ContainerPort: 80, HostPort: 18080},
			{Protocol: "udp", ContainerPort: 53, HostPort: 5353, HostIP: "127.0.0.1"},
		},
		Bandwidth: &network.Bandwidth{IngressRate: 10_000_000, EgressRate: 1_000_000},
		DNS:       &network.DNS{Servers: []string{"10.96.0.10"}, Searches: []string{"svc"}, Options: []string{"ndots:5"}},
	}
	assert.DeepEqual(t, env.net.SetUps(), []network.PodNetwork{want})
	assert.Check(t, env.net.Attached(sbID))
	assert.Check(t, is.Len(env.net.TearDowns(), 0))
}

func TestRunPodSandboxHostNetworkSkipsCNI(t *testing.T) {
	env := newRTEnv(t)
	env.runSandbox(t, rtHostNetwork(rtSandboxConfig("web")))
	assert.Check(t, is.Len(env.net.SetUps(), 0))
}
