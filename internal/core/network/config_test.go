package network

import (
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		kind   func(error) bool // nil: valid
		msg    string
	}{
		{name: "defaults", mutate: func(*Config) {}},
		{name: "docker bridge needs no CNI dirs", mutate: func(c *Config) { c.PluginName = ""; c.BinDirs = nil; c.ConfDir = ""; c.CacheDir = "" }},
		{name: "kubenet", mutate: func(c *Config) { c.PluginName = "kubenet" }, kind: cerrdefs.IsNotImplemented, msg: "kubenet"},
		{name: "unknown plugin", mutate: func(c *Config) { c.PluginName = "flannel" }, kind: cerrdefs.IsInvalidArgument, msg: "flannel"},
		{name: "hairpin veth", mutate: func(c *Config) { c.HairpinMode = HairpinVeth }},
		{name: "promiscuous bridge", mutate: func(c *Config) { c.HairpinMode = PromiscuousBridge }},
		{name: "unknown hairpin mode", mutate: func(c *Config) { c.HairpinMode = "hairpin" }, kind: cerrdefs.IsInvalidArgument, msg: "hairpin"},
		{name: "empty hairpin mode", mutate: func(c *Config) { c.HairpinMode = "" }, kind: cerrdefs.IsInvalidArgument},
		{name: "mtu", mutate: func(c *Config) { c.MTU = 1400 }},
		{name: "negative mtu", mutate: func(c *Config) { c.MTU = -1 }, kind: cerrdefs.IsInvalidArgument, msg: "MTU"},
		{name: "tiny mtu", mutate: func(c *Config) { c.MTU = 60 }, kind: cerrdefs.IsInvalidArgument, msg: "MTU"},
		{name: "pod cidr", mutate: func(c *Config) { c.PodCIDR = "10.1.0.0/24" }},
		{name: "dual-stack pod cidr", mutate: func(c *Config) { c.PodCIDR = "10.1.0.0/24,fd00:1::/64" }},
		{name: "bad pod cidr", mutate: func(c *Config) { c.PodCIDR = "10.1.0.0" }, kind: cerrdefs.IsInvalidArgument, msg: "pod CIDR"},
		{name: "only empty bin dirs", mutate: func(c *Config) { c.BinDirs = []string{"", " "} }, kind: cerrdefs.IsInvalidArgument, msg: "cni-bin-dir"},
		{name: "no conf dir", mutate: func(c *Config) { c.ConfDir = "" }, kind: cerrdefs.IsInvalidArgument, msg: "cni-conf-dir"},
		{name: "no cache dir", mutate: func(c *Config) { c.CacheDir = "" }, kind: cerrdefs.IsInvalidArgument, msg: "cni-cache-dir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mutate(&c)
			err := c.Validate()
			if tt.kind == nil {
				assert.NilError(t, err)
				return
			}
			assert.Assert(t, tt.kind(err), "wrong kind: %v", err)
			assert.Check(t, is.ErrorContains(err, tt.msg))
		})
	}
}

func TestDefaultConfigIsUpstreams(t *testing.T) {
	c := DefaultConfig()
	assert.DeepEqual(t, c, Config{
		PluginName:  "cni",
		BinDirs:     []string{"/opt/cni/bin"},
		ConfDir:     "/etc/cni/net.d",
		CacheDir:    "/var/lib/cni/cache",
		HairpinMode: "none",
	})
}

func TestSplitBinDirs(t *testing.T) {
	assert.DeepEqual(t, SplitBinDirs("/opt/cni/bin"), []string{"/opt/cni/bin"})
	assert.DeepEqual(t, SplitBinDirs("/opt/cni/bin,,/usr/lib/cni, "), []string{"/opt/cni/bin", "/usr/lib/cni"})
	assert.Check(t, is.Len(SplitBinDirs(""), 0))
}

func TestNewRejectsNonCNI(t *testing.T) {
	c := DefaultConfig()
	c.PluginName = ""
	_, err := New(c, nil)
	assert.Assert(t, cerrdefs.IsInvalidArgument(err), "%v", err)
}
