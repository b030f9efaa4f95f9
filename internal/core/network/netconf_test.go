package network

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

const singleBridgeConf = `{"cniVersion": "1.0.0", "name": "single", "type": "bridge", "bridge": "cni0", "ipam": {"type": "host-local", "subnet": "10.22.0.0/24"}}`

func TestStatusConfigLoading(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, e *fakeEnv)
		// file and network are the configuration chosen; err is the expected Status error.
		file, network string
		err           string
	}{
		{
			name:  "no config dir",
			setup: func(t *testing.T, e *fakeEnv) { assert.NilError(t, os.Remove(e.confDir)) },
			err:   "no network config found in",
		},
		{
			name:  "empty config dir",
			setup: func(*testing.T, *fakeEnv) {},
			err:   "no network config found in",
		},
		{
			name: "other files are ignored",
			setup: func(t *testing.T, e *fakeEnv) {
				e.writeConf(t, "README", "{}")
				e.writeConf(t, "10-x.conflist.bak", bridgePortmapList)
				assert.NilError(t, os.Mkdir(filepath.Join(e.confDir, "00-dir.conflist"), 0o755))
			},
			err: "no network config found in",
		},
		{
			name:    ".conf wrapped into a list",
			setup:   func(t *testing.T, e *fakeEnv) { e.writeConf(t, "10-single.conf", singleBridgeConf) },
			file:    "10-single.conf",
			network: "single",
		},
		{
			name:    ".json is a single network",
			setup:   func(t *testing.T, e *fakeEnv) { e.writeConf(t, "10-single.json", singleBridgeConf) },
			file:    "10-single.json",
			network: "single",
		},
		{
			name: "first in lexical order: .conf before a later .conflist",
			setup: func(t *testing.T, e *fakeEnv) {
				e.writeConf(t, "20-list.conflist", bridgePortmapList)
				e.writeConf(t, "10-single.conf", singleBridgeConf)
			},
			file:    "10-single.conf",
			network: "single",
		},
		{
			name: "first in lexical order: .conflist before a later .conf",
			setup: func(t *testing.T, e *fakeEnv) {
				e.writeConf(t, "05-list.conflist", bridgePortmapList)
				e.writeConf(t, "10-single.conf", singleBridgeConf)
			},
			file:    "05-list.conflist",
			network: "testnet",
		},
		{
			name:  "bad JSON names the file",
			setup: func(t *testing.T, e *fakeEnv) { e.writeConf(t, "10-bad.conflist", `{"name": "x", "plugins": [`) },
			err:   "10-bad.conflist: invalid JSON",
		},
		{
			name: "bad file skipped for the next good one",
			setup: func(t *testing.T, e *fakeEnv) {
				e.writeConf(t, "10-bad.conf", `not json`)
				e.writeConf(t, "20-list.conflist", bridgePortmapList)
			},
			file:    "20-list.conflist",
			network: "testnet",
		},
		{
			name:  "a list in a .conf file",
			setup: func(t *testing.T, e *fakeEnv) { e.writeConf(t, "10-list.conf", bridgePortmapList) },
			err:   `10-list.conf: no "type" (a network list belongs in a .conflist file)`,
		},
		{
			name: "list without plugins",
			setup: func(t *testing.T, e *fakeEnv) {
				e.writeConf(t, "10-empty.conflist", `{"cniVersion":"1.0.0","name":"empty","plugins":[]}`)
			},
			err: `10-empty.conflist: error parsing configuration list: no plugins in list`,
		},
		{
			name: "missing plugin binary",
			setup: func(t *testing.T, e *fakeEnv) {
				assert.NilError(t, os.Remove(filepath.Join(e.binDir, "bandwidth")))
				e.writeConf(t, "10-list.conflist", bridgePortmapList)
			},
			err: `10-list.conflist: network "testnet": [failed to find plugin "bandwidth"`,
		},
		{
			name: "missing loopback plugin",
			setup: func(t *testing.T, e *fakeEnv) {
				assert.NilError(t, os.Remove(filepath.Join(e.binDir, "loopback")))
				e.writeConf(t, "10-list.conflist", bridgePortmapList)
			},
			err: "loopback plugin not found in",
		},
		{
			name: "ipRanges capability needs the pod CIDR",
			setup: func(t *testing.T, e *fakeEnv) {
				e.writeConf(t, "10-r.conflist", `{"cniVersion":"1.0.0","name":"ranged","plugins":[
					{"type":"bridge","capabilities":{"ipRanges":true},"ipam":{"type":"host-local"}}]}`)
			},
			err: `network "ranged" needs the node's pod CIDR`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newFakeEnv(t, "bridge", "portmap", "bandwidth")
			tt.setup(t, e)
			m := e.manager(t)
			err := m.Status(context.Background())
			if tt.err != "" {
				assert.Check(t, is.ErrorContains(err, tt.err))
				assert.Check(t, cerrdefs.IsFailedPrecondition(err), "wrong kind: %v", err)
				return
			}
			assert.NilError(t, err)
			assert.Equal(t, filepath.Base(m.current.file), tt.file)
			assert.Equal(t, m.current.list.Name, tt.network)
			assert.Assert(t, len(m.current.list.Plugins) > 0)
		})
	}
}

func TestStatusReloadsOnChange(t *testing.T) {
	e := newFakeEnv(t, "bridge", "portmap", "bandwidth")
	m := e.manager(t)
	ctx := context.Background()

	assert.Check(t, cerrdefs.IsFailedPrecondition(m.Status(ctx)))

	e.writeConf(t, "10-single.conf", singleBridgeConf)
	assert.NilError(t, m.Status(ctx))
	assert.Equal(t, m.current.list.Name, "single")

	e.writeConf(t, "05-list.conflist", bridgePortmapList)
	assert.NilError(t, m.Status(ctx))
	assert.Equal(t, m.current.list.Name, "testnet")

	// A file that stops being usable makes the network not ready (no last-good fallback).
	e.writeConf(t, "05-list.conflist", `{`)
	assert.NilError(t, os.Remove(filepath.Join(e.confDir, "10-single.conf")))
	err := m.Status(ctx)
	assert.Check(t, is.ErrorContains(err, "05-list.conflist: invalid JSON"))

	// Plugins that appear later are found without a change to the config files.
	assert.NilError(t, os.Remove(filepath.Join(e.binDir, "bridge")))
	e.writeConf(t, "05-list.conflist", bridgePortmapList)
	assert.Check(t, is.ErrorContains(m.Status(ctx), `failed to find plugin "bridge"`))
	e.addPlugin(t, "bridge")
	assert.NilError(t, m.Status(ctx))
}

func TestStatusIPRangesNeedPodCIDR(t *testing.T) {
	e := newFakeEnv(t, "bridge")
	e.writeConf(t, "10-r.conflist", `{"cniVersion":"1.0.0","name":"ranged","plugins":[
		{"type":"bridge","capabilities":{"ipRanges":true},"ipam":{"type":"host-local"}}]}`)
	m := e.manager(t)
	ctx := context.Background()

	err := m.Status(ctx)
	assert.Check(t, cerrdefs.IsFailedPrecondition(err))
	assert.Check(t, is.ErrorContains(err, "pod CIDR"))

	assert.Check(t, cerrdefs.IsInvalidArgument(m.SetPodCIDR("nonsense")))
	assert.NilError(t, m.SetPodCIDR("")) // changes nothing
	assert.Check(t, m.Status(ctx) != nil)

	assert.NilError(t, m.SetPodCIDR("10.244.1.0/24"))
	assert.NilError(t, m.Status(ctx))

	// --pod-cidr gives it from the start.
	m = e.manager(t, func(c *Config) { c.PodCIDR = "10.244.2.0/24" })
	assert.NilError(t, m.Status(ctx))
}

func TestBridgeSettingsInjection(t *testing.T) {
	const list = `{"cniVersion":"1.0.0","name":"inj","plugins":[
		{"type":"bridge","bridge":"a","ipam":{"type":"host-local","subnet":"10.22.0.0/24"}},
		{"type":"bridge","bridge":"b","mtu":9000,"hairpinMode":false},
		{"type":"portmap","capabilities":{"portMappings":true}}]}`
	tests := []struct {
		name    string
		mtu     int
		hairpin HairpinMode
		// want are the keys of the three plugins after loading ("-" = absent).
		want [3][2]any
	}{
		{name: "defaults change nothing", hairpin: HairpinNone,
			want: [3][2]any{{"-", "-"}, {"9000", false}, {"-", "-"}}},
		{name: "hairpin-veth", hairpin: HairpinVeth,
			want: [3][2]any{{"-", true}, {"9000", false}, {"-", "-"}}},
		{name: "promiscuous-bridge falls back to hairpin-veth", hairpin: PromiscuousBridge,
			want: [3][2]any{{"-", true}, {"9000", false}, {"-", "-"}}},
		{name: "mtu", mtu: 1400, hairpin: HairpinNone,
			want: [3][2]any{{"1400", "-"}, {"9000", false}, {"-", "-"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newFakeEnv(t, "bridge", "portmap")
			e.writeConf(t, "10-inj.conflist", list)
			m := e.manager(t, func(c *Config) { c.MTU = tt.mtu; c.HairpinMode = tt.hairpin })
			assert.NilError(t, m.Status(context.Background()))
			for i, p := range m.current.list.Plugins {
				var raw map[string]json.RawMessage
				assert.NilError(t, json.Unmarshal(p.Bytes, &raw))
				got := [2]any{"-", "-"}
				if v, ok := raw["mtu"]; ok {
					got[0] = string(v)
				}
				if v, ok := raw["hairpinMode"]; ok {
					var b bool
					assert.NilError(t, json.Unmarshal(v, &b))
					got[1] = b
				}
				assert.DeepEqual(t, got, tt.want[i])
			}
			// The list bytes (cached by libcni and used for DEL) carry the same settings.
			var whole struct{ Plugins []map[string]any }
			assert.NilError(t, json.Unmarshal(m.current.list.Bytes, &whole))
			_, hasHairpin := whole.Plugins[0]["hairpinMode"]
			assert.Equal(t, hasHairpin, tt.hairpin != HairpinNone)
		})
	}
}

func TestInjectionInWrappedConf(t *testing.T) {
	e := newFakeEnv(t, "bridge")
	e.writeConf(t, "10-single.conf", singleBridgeConf)
	m := e.manager(t, func(c *Config) { c.MTU = 1450; c.HairpinMode = HairpinVeth })
	assert.NilError(t, m.Status(context.Background()))
	p := m.current.list.Plugins[0].Network
	assert.Equal(t, p.Type, "bridge")
	var raw map[string]any
	assert.NilError(t, json.Unmarshal(m.current.list.Plugins[0].Bytes, &raw))
	assert.Equal(t, raw["mtu"], float64(1450))
	assert.Equal(t, raw["hairpinMode"], true)
}
