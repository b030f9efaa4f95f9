package network

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func testPod(t *testing.T, id string) PodNetwork {
	return PodNetwork{
		Namespace: "default", Name: "web", UID: "uid-1",
		SandboxID: id,
		NetNS:     fakeNetNS(t),
		PortMappings: []PortMapping{
			{HostPort: 8080, ContainerPort: 80, Protocol: "TCP"},
			{HostPort: 0, ContainerPort: 81, Protocol: "tcp"}, // not exposed on the host
			{HostPort: 5353, ContainerPort: 53, Protocol: "udp", HostIP: "127.0.0.1"},
			{HostPort: 9000, ContainerPort: 9000},
		},
		Bandwidth: &Bandwidth{IngressRate: 10_000_000},
	}
}

func ips(ss ...string) []net.IP {
	out := make([]net.IP, 0, len(ss))
	for _, s := range ss {
		out = append(out, net.ParseIP(s))
	}
	return out
}

func runtimeConfig(t *testing.T, c call) string {
	t.Helper()
	rc, ok := c.Stdin["runtimeConfig"]
	if !ok {
		return ""
	}
	b, err := json.Marshal(rc)
	assert.NilError(t, err)
	return string(b)
}

func TestSetUpAndTearDown(t *testing.T) {
	e := newFakeEnv(t, "bridge", "portmap", "bandwidth")
	e.writeConf(t, "10-list.conflist", bridgePortmapList)
	m := e.manager(t)
	ctx := context.Background()
	pn := testPod(t, "sandbox1")

	res, err := m.SetUp(ctx, pn)
	assert.NilError(t, err)
	// eth0's addresses, IPv4 first; the host bridge's address is not the pod's.
	assert.DeepEqual(t, res, Result{IPs: ips("10.22.0.5", "fd00::5"), Interface: "eth0"})

	calls := e.calls(t)
	assert.DeepEqual(t, summary(calls), []string{
		"loopback ADD lo", "bridge ADD eth0", "portmap ADD eth0", "bandwidth ADD eth0",
	})
	for _, c := range calls {
		assert.Check(t, is.Equal(c.NetNS, pn.NetNS))
		assert.Check(t, is.Equal(c.Args,
			"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=sandbox1;K8S_POD_UID=uid-1"))
	}
	assert.Check(t, is.Equal(calls[0].Stdin["name"], "cni-loopback"))
	assert.Check(t, is.Equal(runtimeConfig(t, calls[0]), ""))
	assert.Check(t, is.Equal(runtimeConfig(t, calls[1]), "")) // bridge declares no capabilities
	assert.Check(t, is.Equal(runtimeConfig(t, calls[2]),
		`{"portMappings":[{"containerPort":80,"hostPort":8080,"protocol":"tcp"},`+
			`{"containerPort":53,"hostIP":"127.0.0.1","hostPort":5353,"protocol":"udp"},`+
			`{"containerPort":9000,"hostPort":9000,"protocol":"tcp"}]}`))
	assert.Check(t, is.Equal(runtimeConfig(t, calls[3]),
		`{"bandwidth":{"ingressBurst":2147483647,"ingressRate":10000000}}`))
	_, chained := calls[2].Stdin["prevResult"]
	assert.Check(t, chained, "portmap gets the bridge's result")

	// The status comes from libcni's cache, also for a new Manager (a restarted shim).
	st, err := m.PodNetworkStatus(ctx, "sandbox1")
	assert.NilError(t, err)
	assert.DeepEqual(t, st, res)
	st, err = e.manager(t).PodNetworkStatus(ctx, "sandbox1")
	assert.NilError(t, err)
	assert.DeepEqual(t, st, res)

	e.resetCalls(t)
	assert.NilError(t, m.TearDown(ctx, pn))
	calls = e.calls(t)
	assert.DeepEqual(t, summary(calls), []string{
		"bandwidth DEL eth0", "portmap DEL eth0", "bridge DEL eth0", "loopback DEL lo",
	})
	assert.Check(t, is.Equal(calls[0].NetNS, pn.NetNS))
	// DEL gets the ADD's capability arguments and result.
	assert.Check(t, is.Contains(runtimeConfig(t, calls[1]), `"hostPort":8080`))
	_, hasPrev := calls[2].Stdin["prevResult"]
	assert.Check(t, hasPrev)

	_, err = m.PodNetworkStatus(ctx, "sandbox1")
	assert.Check(t, cerrdefs.IsNotFound(err), "%v", err)

	// A second TearDown succeeds, with the current configuration (nothing is cached).
	e.resetCalls(t)
	assert.NilError(t, m.TearDown(ctx, pn))
	assert.DeepEqual(t, summary(e.calls(t)), []string{
		"bandwidth DEL eth0", "portmap DEL eth0", "bridge DEL eth0", "loopback DEL lo",
	})
}

func TestTearDownGoneNetNS(t *testing.T) {
	e := newFakeEnv(t, "bridge", "portmap", "bandwidth")
	e.writeConf(t, "10-list.conflist", bridgePortmapList)
	m := e.manager(t)
	ctx := context.Background()
	pn := testPod(t, "sandbox1")
	_, err := m.SetUp(ctx, pn)
	assert.NilError(t, err)

	assert.NilError(t, os.Remove(pn.NetNS)) // the pause container is gone
	e.resetCalls(t)
	assert.NilError(t, m.TearDown(ctx, pn))
	calls := e.calls(t)
	assert.Equal(t, len(calls), 4)
	for _, c := range calls {
		assert.Check(t, is.Equal(c.NetNS, ""), "%s %s", c.Type, c.Command)
	}

	// An empty netns is accepted too.
	pn.NetNS = ""
	assert.NilError(t, m.TearDown(ctx, pn))
}

func TestTearDownUsesCachedConfig(t *testing.T) {
	e := newFakeEnv(t, "bridge", "portmap", "bandwidth", "ptp")
	e.writeConf(t, "10-list.conflist", bridgePortmapList)
	m := e.manager(t)
	ctx := context.Background()
	pn := testPod(t, "sandbox1")
	_, err := m.SetUp(ctx, pn)
	assert.NilError(t, err)

	// The operator switches networks while the pod runs.
	assert.NilError(t, os.Remove(filepath.Join(e.confDir, "10-list.conflist")))
	e.writeConf(t, "20-other.conflist", `{"cniVersion":"1.0.0","name":"other","plugins":[{"type":"ptp","ipam":{"type":"host-local"}}]}`)
	assert.NilError(t, m.Status(ctx))

	e.resetCalls(t)
	assert.NilError(t, m.TearDown(ctx, pn))
	calls := e.calls(t)
	assert.DeepEqual(t, summary(calls), []string{
		"bandwidth DEL eth0", "portmap DEL eth0", "bridge DEL eth0", "loopback DEL lo",
	})
	assert.Check(t, is.Equal(calls[2].Stdin["name"], "testnet"))

	// Without any configuration, the cache still allows the DEL.
	_, err = m.SetUp(ctx, testPod(t, "sandbox2"))
	assert.NilError(t, err)
	assert.NilError(t, os.Remove(filepath.Join(e.confDir, "20-other.conflist")))
	assert.Check(t, m.Status(ctx) != nil)
	e.resetCalls(t)
	assert.NilError(t, m.TearDown(ctx, testPod(t, "sandbox2")))
	assert.DeepEqual(t, summary(e.calls(t)), []string{"ptp DEL eth0", "loopback DEL lo"})

	// With neither, TearDown cannot know what to delete. While the namespace lives the
	// caller must retry; once it is gone nothing findable is left, and the sandbox's
	// cleanup must not wait for a config to come back.
	err = m.TearDown(ctx, testPod(t, "sandbox3"))
	assert.Check(t, cerrdefs.IsFailedPrecondition(err), "%v", err)
	assert.Check(t, is.ErrorContains(err, "tear down network of sandbox sandbox3: no network config found"))
	gone := testPod(t, "sandbox3")
	gone.NetNS = ""
	e.resetCalls(t)
	assert.NilError(t, m.TearDown(ctx, gone))
	assert.DeepEqual(t, summary(e.calls(t)), []string{"loopback DEL lo"})
}

func TestSetUpFailure(t *testing.T) {
	tests := []struct {
		name     string
		plugin   string
		output   string
		kind     func(error) bool
		msg      string
		wantDels []string
	}{
		{
			name:   "try again later",
			plugin: "portmap",
			output: `{"cniVersion":"1.0.0","code":11,"msg":"iptables is locked"}`,
			kind:   cerrdefs.IsUnavailable,
			msg:    `set up network of sandbox sb: network "testnet": plugin type="portmap" failed (add): iptables is locked`,
			wantDels: []string{
				"loopback ADD lo", "bridge ADD eth0", "portmap ADD eth0",
				"bandwidth DEL eth0", "portmap DEL eth0", "bridge DEL eth0", "loopback DEL lo",
			},
		},
		{
			name:   "invalid network config",
			plugin: "bridge",
			output: `{"cniVersion":"1.0.0","code":7,"msg":"bad subnet","details":"10.22.0.0/33"}`,
			kind:   cerrdefs.IsFailedPrecondition,
			msg:    `plugin type="bridge" failed (add): bad subnet; 10.22.0.0/33`,
			wantDels: []string{
				"loopback ADD lo", "bridge ADD eth0",
				"bandwidth DEL eth0", "portmap DEL eth0", "bridge DEL eth0", "loopback DEL lo",
			},
		},
		{
			name:   "plugin's own code",
			plugin: "bridge",
			output: `{"cniVersion":"1.0.0","code":100,"msg":"no bridge for you"}`,
			kind:   cerrdefs.IsUnknown,
			msg:    "no bridge for you",
		},
		{
			name:   "not JSON",
			plugin: "bandwidth",
			output: "segfault",
			kind:   cerrdefs.IsUnknown,
			msg:    `plugin type="bandwidth" failed (add)`,
		},
		{
			name:   "loopback",
			plugin: "loopback",
			output: `{"cniVersion":"0.3.1","code":999,"msg":"lo is down"}`,
			kind:   cerrdefs.IsUnknown,
			msg:    "set up network of sandbox sb: loopback: plugin type=\"loopback\" failed (add): lo is down",
			wantDels: []string{
				"loopback ADD lo", "loopback DEL lo",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newFakeEnv(t, "bridge", "portmap", "bandwidth")
			e.writeConf(t, "10-list.conflist", bridgePortmapList)
			e.fail(t, tt.plugin, "ADD", tt.output)
			m := e.manager(t)
			ctx := context.Background()

			_, err := m.SetUp(ctx, testPod(t, "sb"))
			assert.Assert(t, err != nil)
			assert.Check(t, tt.kind(err), "wrong kind: %v", err)
			assert.Check(t, is.ErrorContains(err, tt.msg))
			var cniErr *cnitypes.Error
			if strings.HasPrefix(tt.output, "{") {
				assert.Check(t, errors.As(err, &cniErr), "the plugin's error stays reachable")
			}
			if tt.wantDels != nil {
				assert.DeepEqual(t, summary(e.calls(t)), tt.wantDels)
			}
			_, err = m.PodNetworkStatus(ctx, "sb")
			assert.Check(t, cerrdefs.IsNotFound(err), "nothing cached after a failed set up: %v", err)
		})
	}
}

func TestTearDownFailure(t *testing.T) {
	e := newFakeEnv(t, "bridge", "portmap", "bandwidth")
	e.writeConf(t, "10-list.conflist", bridgePortmapList)
	m := e.manager(t)
	ctx := context.Background()
	pn := testPod(t, "sb")
	_, err := m.SetUp(ctx, pn)
	assert.NilError(t, err)

	e.fail(t, "bridge", "DEL", `{"cniVersion":"1.0.0","code":11,"msg":"busy"}`)
	e.fail(t, "loopback", "DEL", `{"cniVersion":"0.3.1","code":999,"msg":"ignored"}`)
	err = m.TearDown(ctx, pn)
	assert.Check(t, cerrdefs.IsUnavailable(err), "%v", err)
	assert.Check(t, is.ErrorContains(err, `tear down network of sandbox sb: network "testnet": plugin type="bridge" failed (delete): busy`))

	// The loopback plugin's failure alone is only logged.
	assert.NilError(t, os.Remove(filepath.Join(e.binDir, "fail-bridge-DEL")))
	assert.NilError(t, m.TearDown(ctx, pn))
}

func TestSetUpInvalidArguments(t *testing.T) {
	e := newFakeEnv(t, "bridge", "portmap", "bandwidth")
	e.writeConf(t, "10-list.conflist", bridgePortmapList)
	m := e.manager(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		mutate func(*PodNetwork)
		msg    string
	}{
		{name: "no sandbox", mutate: func(p *PodNetwork) { p.SandboxID = "" }, msg: "no sandbox ID"},
		{name: "no netns", mutate: func(p *PodNetwork) { p.NetNS = "" }, msg: "no network namespace"},
		{name: "protocol", mutate: func(p *PodNetwork) { p.PortMappings[0].Protocol = "icmp" }, msg: "unknown protocol"},
		{name: "port", mutate: func(p *PodNetwork) { p.PortMappings[0].ContainerPort = 0 }, msg: "port out of range"},
		{name: "host port", mutate: func(p *PodNetwork) { p.PortMappings[0].HostPort = 70000 }, msg: "port out of range"},
		{name: "host IP", mutate: func(p *PodNetwork) { p.PortMappings[0].HostIP = "localhost" }, msg: "invalid host IP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pn := testPod(t, "sb")
			tt.mutate(&pn)
			_, err := m.SetUp(ctx, pn)
			assert.Check(t, cerrdefs.IsInvalidArgument(err), "%v", err)
			assert.Check(t, is.ErrorContains(err, tt.msg))
		})
	}
	e.resetCalls(t)
	assert.Check(t, cerrdefs.IsInvalidArgument(m.TearDown(ctx, PodNetwork{})))
	_, err := m.PodNetworkStatus(ctx, "")
	assert.Check(t, cerrdefs.IsInvalidArgument(err))
	assert.Check(t, is.Len(e.calls(t), 0))
}

func TestSetUpNotReady(t *testing.T) {
	e := newFakeEnv(t, "bridge")
	m := e.manager(t)
	_, err := m.SetUp(context.Background(), testPod(t, "sb"))
	assert.Check(t, cerrdefs.IsFailedPrecondition(err), "%v", err)
	assert.Check(t, is.ErrorContains(err, "set up network of sandbox sb: no network config found in"))
}

func TestSetUpCancelled(t *testing.T) {
	e := newFakeEnv(t, "bridge", "portmap", "bandwidth")
	e.writeConf(t, "10-list.conflist", bridgePortmapList)
	m := e.manager(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.SetUp(ctx, testPod(t, "sb"))
	assert.Check(t, errors.Is(err, context.Canceled), "%v", err)
}

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

func TestSetUpPassesPodCIDRAndInjectedSettings(t *testing.T) {
	e := newFakeEnv(t, "bridge")
	e.writeConf(t, "10-r.conflist", `{"cniVersion":"1.0.0","name":"ranged","plugins":[
		{"type":"bridge","capabilities":{"ipRanges":true},"ipam":{"type":"host-local"}}]}`)
	m := e.manager(t, func(c *Config) { c.MTU = 1400; c.HairpinMode = HairpinVeth })
	ctx := context.Background()
	assert.NilError(t, m.SetPodCIDR("10.244.1.0/24,fd00:244::/64"))
	_, err := m.SetUp(ctx, testPod(t, "sb"))
	assert.NilError(t, err)
	calls := e.calls(t)
	assert.Equal(t, len(calls), 2)
	assert.Check(t, is.Equal(runtimeConfig(t, calls[1]),
		`{"ipRanges":[[{"subnet":"10.244.1.0/24"}],[{"subnet":"fd00:244::/64"}]]}`))
	assert.Check(t, is.Equal(calls[1].Stdin["mtu"], float64(1400)))
	assert.Check(t, is.Equal(calls[1].Stdin["hairpinMode"], true))
}

func TestToResult(t *testing.T) {
	tests := []struct {
		name string
		json string
		want []net.IP
	}{
		{name: "interfaces named", json: `{"cniVersion":"1.0.0","interfaces":[{"name":"cni0"},{"name":"eth0","sandbox":"/ns"}],
			"ips":[{"address":"fd00::5/64","interface":1},{"address":"10.0.0.1/24","interface":0},{"address":"10.0.0.5/24","interface":1}]}`,
			want: ips("10.0.0.5", "fd00::5")},
		{name: "no interfaces", json: `{"cniVersion":"1.0.0","ips":[{"address":"fd00::5/64"},{"address":"10.0.0.5/24"},{"address":"10.0.0.6/24"}]}`,
			want: ips("10.0.0.5", "10.0.0.6", "fd00::5")},
		{name: "old version", json: `{"cniVersion":"0.2.0","ip4":{"ip":"10.0.0.7/24"}}`,
			want: ips("10.0.0.7")},
		{name: "no IPs", json: `{"cniVersion":"1.0.0"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v struct {
				CNIVersion string `json:"cniVersion"`
			}
			assert.NilError(t, json.Unmarshal([]byte(tt.json), &v))
			res, err := resultFromJSON(v.CNIVersion, []byte(tt.json))
			assert.NilError(t, err)
			r, err := toResult(res)
			assert.NilError(t, err)
			assert.DeepEqual(t, r.IPs, tt.want)
			assert.Equal(t, r.Interface, "eth0")
		})
	}
}

func TestConcurrentSetUp(t *testing.T) {
	e := newFakeEnv(t, "bridge", "portmap", "bandwidth")
	e.writeConf(t, "10-list.conflist", bridgePortmapList)
	m := e.manager(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pn := testPod(t, fmt.Sprintf("sb%d", i))
			if _, err := m.SetUp(ctx, pn); err != nil {
				errs <- err
				return
			}
			if err := m.Status(ctx); err != nil {
				errs <- err
			}
			if err := m.SetPodCIDR(fmt.Sprintf("10.%d.0.0/16", i)); err != nil {
				errs <- err
			}
			if _, err := m.PodNetworkStatus(ctx, pn.SandboxID); err != nil {
				errs <- err
			}
			if err := m.TearDown(ctx, pn); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
