package network

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/dockpin/cri-dockerd/internal/logctx"
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

// newListEnv is a fake environment with the bridge, portmap and bandwidth plugins
// (and any extra ones) whose one config is bridgePortmapList.
func newListEnv(t *testing.T, extra ...string) *fakeEnv {
	t.Helper()
	e := newFakeEnv(t, append([]string{"bridge", "portmap", "bandwidth"}, extra...)...)
	e.writeConf(t, "10-list.conflist", bridgePortmapList)
	return e
}

// setUpPod sets up the network of testPod(t, id) with m and returns the pod.
func setUpPod(t *testing.T, m *Manager, id string) PodNetwork {
	t.Helper()
	pn := testPod(t, id)
	_, err := m.SetUp(context.Background(), pn)
	assert.NilError(t, err)
	return pn
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
	e := newListEnv(t)
	m := e.manager(t)
	ctx := context.Background()
	pn := testPod(t, "sandbox1")

	assert.Check(t, !m.Attached("sandbox1"))
	res, err := m.SetUp(ctx, pn)
	assert.NilError(t, err)
	assert.Check(t, m.Attached("sandbox1"))
	// eth0's addresses, IPv4 first; the host bridge's address is not the pod's.
	assert.DeepEqual(t, res, Result{IPs: ips("10.22.0.5", "fd00::5"), Interface: "eth0"})

	calls := e.calls(t)
	assert.DeepEqual(t, summary(calls), []string{
		"bridge ADD eth0", "portmap ADD eth0", "bandwidth ADD eth0", "loopback ADD lo",
	})
	for _, c := range calls {
		assert.Check(t, is.Equal(c.NetNS, pn.NetNS))
		assert.Check(t, is.Equal(c.Args,
			"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=sandbox1;K8S_POD_UID=uid-1"))
	}
	assert.Check(t, is.Equal(calls[3].Stdin["name"], "cni-loopback"))
	assert.Check(t, is.Equal(runtimeConfig(t, calls[3]), ""))
	assert.Check(t, is.Equal(runtimeConfig(t, calls[0]), "")) // bridge declares no capabilities
	assert.Check(t, is.Equal(runtimeConfig(t, calls[1]),
		`{"portMappings":[{"containerPort":80,"hostPort":8080,"protocol":"tcp"},`+
			`{"containerPort":53,"hostIP":"127.0.0.1","hostPort":5353,"protocol":"udp"},`+
			`{"containerPort":9000,"hostPort":9000,"protocol":"tcp"}]}`))
	assert.Check(t, is.Equal(runtimeConfig(t, calls[2]),
		`{"bandwidth":{"ingressBurst":2147483647,"ingressRate":10000000}}`))
	_, chained := calls[1].Stdin["prevResult"]
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
	assert.Check(t, !m.Attached("sandbox1"), "torn down: nothing recorded")

	// A second TearDown succeeds, with the current configuration (nothing is cached).
	e.resetCalls(t)
	assert.NilError(t, m.TearDown(ctx, pn))
	assert.DeepEqual(t, summary(e.calls(t)), []string{
		"bandwidth DEL eth0", "portmap DEL eth0", "bridge DEL eth0", "loopback DEL lo",
	})
}

func TestTearDownGoneNetNS(t *testing.T) {
	e := newListEnv(t)
	m := e.manager(t)
	ctx := context.Background()
	pn := setUpPod(t, m, "sandbox1")

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
	e := newListEnv(t, "ptp")
	m := e.manager(t)
	ctx := context.Background()
	pn := setUpPod(t, m, "sandbox1")

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
	setUpPod(t, m, "sandbox2")
	assert.NilError(t, os.Remove(filepath.Join(e.confDir, "20-other.conflist")))
	assert.Check(t, m.Status(ctx) != nil)
	e.resetCalls(t)
	assert.NilError(t, m.TearDown(ctx, testPod(t, "sandbox2")))
	assert.DeepEqual(t, summary(e.calls(t)), []string{"ptp DEL eth0", "loopback DEL lo"})

	// With neither, TearDown cannot know what to delete. While the namespace lives the
	// caller must retry; once it is gone nothing findable is left, and the sandbox's
	// cleanup must not wait for a config to come back.
	err := m.TearDown(ctx, testPod(t, "sandbox3"))
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
				"bridge ADD eth0", "portmap ADD eth0",
				"bandwidth DEL eth0", "portmap DEL eth0", "bridge DEL eth0", "loopback ADD lo", "loopback DEL lo",
			},
		},
		{
			name:   "invalid network config",
			plugin: "bridge",
			output: `{"cniVersion":"1.0.0","code":7,"msg":"bad subnet","details":"10.22.0.0/33"}`,
			kind:   cerrdefs.IsFailedPrecondition,
			msg:    `plugin type="bridge" failed (add): bad subnet; 10.22.0.0/33`,
			wantDels: []string{
				"bridge ADD eth0",
				"bandwidth DEL eth0", "portmap DEL eth0", "bridge DEL eth0", "loopback ADD lo", "loopback DEL lo",
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
			// The pod network was set up at the same time: it is taken down too.
			wantDels: []string{
				"bridge ADD eth0", "portmap ADD eth0", "bandwidth ADD eth0",
				"bandwidth DEL eth0", "portmap DEL eth0", "bridge DEL eth0", "loopback ADD lo", "loopback DEL lo",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newListEnv(t)
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
	e := newListEnv(t)
	m := e.manager(t)
	ctx := context.Background()
	pn := setUpPod(t, m, "sb")

	e.fail(t, "bridge", "DEL", `{"cniVersion":"1.0.0","code":11,"msg":"busy"}`)
	e.fail(t, "loopback", "DEL", `{"cniVersion":"0.3.1","code":999,"msg":"ignored"}`)
	err := m.TearDown(ctx, pn)
	assert.Check(t, cerrdefs.IsUnavailable(err), "%v", err)
	assert.Check(t, is.ErrorContains(err, `tear down network of sandbox sb: network "testnet": plugin type="bridge" failed (delete): busy`))

	// The loopback plugin's failure alone is only logged.
	assert.NilError(t, os.Remove(filepath.Join(e.binDir, "fail-bridge-DEL")))
	assert.NilError(t, m.TearDown(ctx, pn))
}

func TestSetUpInvalidArguments(t *testing.T) {
	e := newListEnv(t)
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
	e := newListEnv(t)
	m := e.manager(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.SetUp(ctx, testPod(t, "sb"))
	assert.Check(t, errors.Is(err, context.Canceled), "%v", err)
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
	assert.Check(t, is.Equal(runtimeConfig(t, calls[0]),
		`{"ipRanges":[[{"subnet":"10.244.1.0/24"}],[{"subnet":"fd00:244::/64"}]]}`))
	assert.Check(t, is.Equal(calls[0].Stdin["mtu"], float64(1400)))
	assert.Check(t, is.Equal(calls[0].Stdin["hairpinMode"], true))
}

func TestPluginRunsAreRequestPhases(t *testing.T) {
	e := newListEnv(t)
	m := e.manager(t)
	ctx, phases := logctx.WithPhases(context.Background())
	pn := testPod(t, "sandbox1")
	_, err := m.SetUp(ctx, pn)
	assert.NilError(t, err)
	assert.NilError(t, m.TearDown(ctx, pn))
	f := phases.Fields()
	for _, k := range []string{"t.cni.loopback.add", "t.cni.bridge.add", "t.cni.portmap.add", "t.cni.bridge.del", "t.cni.loopback.del"} {
		_, ok := f[k]
		assert.Check(t, ok, "no phase %s in %v", k, f)
	}
}
