package network

import (
	"fmt"
	"net"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
)

// PluginCNI is the --network-plugin value for CNI, the only plugin this package handles.
const PluginCNI = "cni"

// HairpinMode is the value of --hairpin-mode.
type HairpinMode string

// The --hairpin-mode values, as upstream spells them.
const (
	// HairpinNone leaves hairpin traffic to the network configuration (upstream's default).
	HairpinNone HairpinMode = "none"
	// HairpinVeth sets the hairpin flag on the pod's veth port on the bridge, so that a pod
	// can reach itself through a service IP.
	HairpinVeth HairpinMode = "hairpin-veth"
	// PromiscuousBridge is kubenet's mode (bridge in promiscuous mode plus ebtables
	// de-duplication). Without kubenet, upstream falls back to HairpinVeth; so do we.
	PromiscuousBridge HairpinMode = "promiscuous-bridge"
)

// Config is the network part of the command line. The names of upstream's flags are
// in the doc comments; DefaultConfig gives upstream's defaults.
type Config struct {
	// PluginName is --network-plugin: "cni" (default) or "" (Docker's default bridge
	// network, which is not handled by this package). "kubenet" is not supported.
	PluginName string
	// BinDirs is --cni-bin-dir (a comma-separated list on the command line): the
	// directories searched, in order, for plugin binaries, the loopback plugin included.
	// Empty entries are ignored.
	BinDirs []string
	// ConfDir is --cni-conf-dir: the directory holding *.conflist, *.conf and *.json
	// network configurations; the first usable one in lexical order is used.
	ConfDir string
	// CacheDir is --cni-cache-dir: libcni's cache of ADD results and the configuration
	// they were made with, used for DEL and to report pod IPs after a restart.
	CacheDir string
	// MTU is --network-plugin-mtu; 0 keeps the plugins' default. When set, it is written
	// as "mtu" into every "bridge" plugin of the loaded configuration that does not set
	// "mtu" itself (upstream only honoured it in kubenet's generated bridge config).
	MTU int
	// HairpinMode is --hairpin-mode: none, hairpin-veth or promiscuous-bridge. With
	// hairpin-veth (and promiscuous-bridge, which falls back to it as upstream does
	// without kubenet), "hairpinMode": true is written into every "bridge" plugin of the
	// loaded configuration that does not set "hairpinMode" itself.
	HairpinMode HairpinMode
	// PodCIDR is --pod-cidr: the node's pod CIDR (comma-separated for dual stack), sent
	// to plugins that declare the ipRanges capability. Kubelet updates it at run time
	// through UpdateRuntimeConfig (Manager.SetPodCIDR).
	PodCIDR string
}

// DefaultConfig returns upstream cri-dockerd's defaults.
func DefaultConfig() Config {
	return Config{
		PluginName:  PluginCNI,
		BinDirs:     []string{"/opt/cni/bin"},
		ConfDir:     "/etc/cni/net.d",
		CacheDir:    "/var/lib/cni/cache",
		HairpinMode: HairpinNone,
	}
}

// SplitBinDirs splits the --cni-bin-dir value (comma-separated, like upstream) and
// drops empty entries.
func SplitBinDirs(s string) []string {
	return cleanDirs(strings.Split(s, ","))
}

// Validate checks the values a user can get wrong. Errors wrap ErrInvalidArgument,
// or ErrNotImplemented for --network-plugin=kubenet.
func (c Config) Validate() error {
	switch c.PluginName {
	case PluginCNI, "":
	case "kubenet":
		return fmt.Errorf("network plugin %q is not supported, use %q: %w", c.PluginName, PluginCNI, cerrdefs.ErrNotImplemented)
	default:
		return fmt.Errorf("unknown network plugin %q (want %q or \"\"): %w", c.PluginName, PluginCNI, cerrdefs.ErrInvalidArgument)
	}
	switch c.HairpinMode {
	case HairpinNone, HairpinVeth, PromiscuousBridge:
	default:
		return fmt.Errorf("unknown hairpin mode %q (want %s, %s or %s): %w",
			c.HairpinMode, HairpinNone, HairpinVeth, PromiscuousBridge, cerrdefs.ErrInvalidArgument)
	}
	if c.MTU != 0 && (c.MTU < 68 || c.MTU > 65535) {
		return fmt.Errorf("network plugin MTU %d out of range (0 or 68-65535): %w", c.MTU, cerrdefs.ErrInvalidArgument)
	}
	if _, err := parsePodCIDR(c.PodCIDR); err != nil {
		return err
	}
	if c.PluginName != PluginCNI {
		return nil
	}
	if len(cleanDirs(c.BinDirs)) == 0 {
		return fmt.Errorf("no CNI plugin directory (--cni-bin-dir): %w", cerrdefs.ErrInvalidArgument)
	}
	if c.ConfDir == "" {
		return fmt.Errorf("no CNI config directory (--cni-conf-dir): %w", cerrdefs.ErrInvalidArgument)
	}
	if c.CacheDir == "" {
		return fmt.Errorf("no CNI cache directory (--cni-cache-dir): %w", cerrdefs.ErrInvalidArgument)
	}
	return nil
}

// hairpinVeth reports whether the bridge plugins get "hairpinMode": true.
func (c Config) hairpinVeth() bool {
	return c.HairpinMode == HairpinVeth || c.HairpinMode == PromiscuousBridge
}

func cleanDirs(dirs []string) []string {
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// parsePodCIDR splits a pod CIDR value ("" or one or more comma-separated CIDRs) and
// checks each part.
func parsePodCIDR(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var cidrs []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if _, _, err := net.ParseCIDR(part); err != nil {
			return nil, fmt.Errorf("pod CIDR %q: %w", s, cerrdefs.ErrInvalidArgument)
		}
		cidrs = append(cidrs, part)
	}
	return cidrs, nil
}
