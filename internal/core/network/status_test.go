package network

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func ips(ss ...string) []net.IP {
	out := make([]net.IP, 0, len(ss))
	for _, s := range ss {
		out = append(out, net.ParseIP(s))
	}
	return out
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

// upstreamSandbox is a sandbox ID as the engine makes them.
const upstreamSandbox = "5f0c2b8e6a1d4c3b9e7f8a6d5c4b3a291807f6e5d4c3b2a1908f7e6d5c4b3a29"

// upstreamArgs are the CNI_ARGS upstream cri-dockerd passes to both of its networks.
var upstreamArgs = [][2]string{
	{"IgnoreUnknown", "1"},
	{"K8S_POD_NAMESPACE", "default"},
	{"K8S_POD_NAME", "web"},
	{"K8S_POD_INFRA_CONTAINER_ID", upstreamSandbox},
}

// writeUpstreamCache writes libcni's cache entry results/<network>-<id>-eth0 as upstream
// cri-dockerd 246bd657 (libcni v1.1.2) leaves it, read off its --cni-cache-dir under the
// e2e suite (TestSwapUpstreamToOurs logs them): kind cniCacheV1, containerId, the network
// config's bytes (base64 in JSON), ifName eth0 for both networks, networkName, cniArgs
// without K8S_POD_UID, capabilityArgs (ipRanges with an empty subnet, portMappings), no
// netns, and the plugin result as a JSON object.
func writeUpstreamCache(t *testing.T, cacheDir, network, config, result string, caps map[string]any) string {
	t.Helper()
	entry := map[string]any{
		"kind":           "cniCacheV1",
		"containerId":    upstreamSandbox,
		"config":         []byte(config),
		"ifName":         "eth0",
		"networkName":    network,
		"cniArgs":        upstreamArgs,
		"capabilityArgs": caps,
		"result":         json.RawMessage(result),
	}
	b, err := json.Marshal(entry)
	assert.NilError(t, err)
	dir := filepath.Join(cacheDir, "results")
	assert.NilError(t, os.MkdirAll(dir, 0o700))
	p := filepath.Join(dir, network+"-"+upstreamSandbox+"-eth0")
	assert.NilError(t, os.WriteFile(p, b, 0o600))
	return p
}

const (
	// upstream's loopback network, byte for byte: CNI 0.2.0, recorded under eth0 like the
	// pod network.
	upstreamLoopbackConfig = "{\n  \"cniVersion\": \"0.2.0\",\n  \"name\": \"cni-loopback\",\n  \"plugins\":[{\n    \"type\": \"loopback\"\n  }]\n}"
	// What Debian's loopback plugin (1.1.1) records for it: no addresses at all. It sorts
	// before most pod networks' entries, and taken for the pod's it made the IP empty.
	upstreamLoopbackResult = `{"cniVersion":"0.2.0","dns":{}}`
	// What a loopback plugin that reports lo's addresses records (plugins v1.9).
	upstreamLoopbackResultIPs = `{"cniVersion":"0.2.0","ip4":{"ip":"127.0.0.1/8"},"ip6":{"ip":"::1/128"},"dns":{}}`
	upstreamPodResult         = `{"cniVersion":"1.0.0","interfaces":[{"name":"cni0","mac":"aa:bb:cc:dd:ee:01"},` +
		`{"name":"veth1234","mac":"aa:bb:cc:dd:ee:02"},{"name":"eth0","mac":"aa:bb:cc:dd:ee:03","sandbox":"/proc/4242/ns/net"}],` +
		`"ips":[{"address":"10.22.0.7/24","gateway":"10.22.0.1","interface":2}],"dns":{}}`
)

// upstreamCaps are the capability arguments upstream passes to both networks.
var upstreamCaps = map[string]any{"portMappings": []any{}, "ipRanges": [][]map[string]string{{{"subnet": ""}}}}

// TestUpstreamCacheLayout reads and tears down a sandbox that upstream cri-dockerd set
// up: its loopback entry (cni-loopback-<id>-eth0) sorts before the pod network's and
// must not shadow it; both are deleted, the loopback with its own config.
func TestUpstreamCacheLayout(t *testing.T) {
	tests := []struct {
		name     string
		network  string // the pod network's name: sorting before or after cni-loopback
		loResult string
	}{
		{name: "pod network after loopback", network: "testnet", loResult: upstreamLoopbackResult},
		{name: "pod network after loopback with addresses", network: "testnet", loResult: upstreamLoopbackResultIPs},
		{name: "pod network before loopback", network: "bridgenet", loResult: upstreamLoopbackResult},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newFakeEnv(t, "bridge", "portmap", "bandwidth")
			conf := `{"cniVersion":"1.0.0","name":"` + tt.network + `","plugins":[` +
				`{"type":"bridge","bridge":"cni0","ipam":{"type":"host-local","subnet":"10.22.0.0/24"}},` +
				`{"type":"portmap","capabilities":{"portMappings":true}}]}`
			e.writeConf(t, "10-list.conflist", conf)
			lo := writeUpstreamCache(t, e.cacheDir, "cni-loopback", upstreamLoopbackConfig, tt.loResult, upstreamCaps)
			pod := writeUpstreamCache(t, e.cacheDir, tt.network, conf, upstreamPodResult, upstreamCaps)
			ctx := context.Background()

			for _, m := range []*Manager{e.manager(t), loadedManager(t, e)} {
				st, err := m.PodNetworkStatus(ctx, upstreamSandbox)
				assert.NilError(t, err)
				assert.DeepEqual(t, st, Result{IPs: ips("10.22.0.7"), Interface: "eth0"})
			}

			pn := PodNetwork{Namespace: "default", Name: "web", UID: "uid-1", SandboxID: upstreamSandbox, NetNS: fakeNetNS(t)}
			e.fail(t, "loopback", "DEL", `{"code":999,"msg":"loopback is broken"}`) // only logged, as upstream
			assert.NilError(t, e.manager(t).TearDown(ctx, pn))
			calls := e.calls(t)
			assert.DeepEqual(t, summary(calls), []string{
				"portmap DEL eth0", "bridge DEL eth0", "loopback DEL eth0", "loopback DEL lo",
			})
			assert.Check(t, is.Equal(calls[2].Stdin["cniVersion"], "0.2.0"), "upstream's loopback deleted with its own config")
			assert.Check(t, is.Equal(calls[2].Args, "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID="+upstreamSandbox))
			_, err := os.Stat(pod)
			assert.Check(t, os.IsNotExist(err), "pod network cache entry left: %v", err)
			_, err = os.Stat(lo)
			// libcni deletes the cache entry only when the DEL succeeded.
			assert.Check(t, err == nil, "a failed loopback DEL keeps its entry: %v", err)

			assert.NilError(t, os.Remove(filepath.Join(e.binDir, "fail-loopback-DEL")))
			e.resetCalls(t)
			assert.NilError(t, e.manager(t).TearDown(ctx, pn))
			_, err = os.Stat(lo)
			assert.Check(t, os.IsNotExist(err), "upstream's loopback cache entry left: %v", err)
			_, err = e.manager(t).PodNetworkStatus(ctx, upstreamSandbox)
			assert.Check(t, cerrdefs.IsNotFound(err), "%v", err)
		})
	}
}

// TestUpstreamLoopbackOnly: a sandbox whose only eth0 entry is upstream's loopback has no
// pod IP recorded (NotFound, never 127.0.0.1), and its teardown still deletes the pod
// network with the current config.
func TestUpstreamLoopbackOnly(t *testing.T) {
	e := newFakeEnv(t, "bridge", "portmap", "bandwidth")
	e.writeConf(t, "10-list.conflist", bridgePortmapList)
	writeUpstreamCache(t, e.cacheDir, "cni-loopback", upstreamLoopbackConfig, upstreamLoopbackResultIPs, upstreamCaps)
	m := e.manager(t)
	ctx := context.Background()
	_, err := m.PodNetworkStatus(ctx, upstreamSandbox)
	assert.Check(t, cerrdefs.IsNotFound(err), "%v", err)

	pn := PodNetwork{Namespace: "default", Name: "web", UID: "uid-1", SandboxID: upstreamSandbox}
	assert.NilError(t, m.TearDown(ctx, pn))
	assert.DeepEqual(t, summary(e.calls(t)), []string{
		"bandwidth DEL eth0", "portmap DEL eth0", "bridge DEL eth0", "loopback DEL eth0", "loopback DEL lo",
	})
}

// loadedManager is a Manager that has loaded the current network config (the status
// then prefers that network's entry).
func loadedManager(t *testing.T, e *fakeEnv) *Manager {
	t.Helper()
	m := e.manager(t)
	assert.NilError(t, m.Status(context.Background()))
	return m
}
