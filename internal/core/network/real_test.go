//go:build linux

package network

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// debianPluginDir is where Debian's containernetworking-plugins installs the plugins
// (hack/cni.sh install).
const debianPluginDir = "/usr/lib/cni"

// realBridge and realSubnet are private to this test; nothing is routed or masqueraded
// beyond the bridge, and no traffic leaves the namespace and the bridge.
const (
	realBridge  = "dkpintest0"
	realSubnet  = "10.213.0.0/24"
	realNetwork = "dkpintest"
)

func sh(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	assert.NilError(t, err, "%s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// TestRealPlugins runs Debian's bridge, host-local and loopback plugins against a
// network namespace of its own, with --hairpin-mode=hairpin-veth and an MTU.
func TestRealPlugins(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace and a bridge")
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(debianPluginDir, p)); err != nil {
			t.Skipf("CNI plugin %s missing in %s (hack/cni.sh install)", p, debianPluginDir)
		}
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip (iproute2)")
	}

	// The bridge plugin turns on IPv4 forwarding for a gateway; put it back afterwards.
	const forwarding = "/proc/sys/net/ipv4/ip_forward"
	if old, err := os.ReadFile(forwarding); err == nil {
		t.Cleanup(func() { _ = os.WriteFile(forwarding, old, 0o644) })
	}
	_ = exec.Command("ip", "link", "delete", realBridge).Run() // left over by a killed run
	t.Cleanup(func() { _ = exec.Command("ip", "link", "delete", realBridge).Run() })

	nsName := fmt.Sprintf("dkpintest-%d", os.Getpid())
	sh(t, "ip", "netns", "add", nsName)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", nsName).Run() })
	nsPath := "/run/netns/" + nsName
	inNS := func(args ...string) string {
		return sh(t, append([]string{"ip", "netns", "exec", nsName}, args...)...)
	}

	root := t.TempDir()
	dataDir := filepath.Join(root, "ipam")
	confDir := filepath.Join(root, "net.d")
	assert.NilError(t, os.MkdirAll(confDir, 0o755))
	assert.NilError(t, os.WriteFile(filepath.Join(confDir, "10-test.conflist"), []byte(fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [{
    "type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "dataDir": %q}
  }]
}`, realNetwork, realBridge, realSubnet, dataDir)), 0o644))

	cfg := DefaultConfig()
	cfg.BinDirs = []string{"/nonexistent", debianPluginDir}
	cfg.ConfDir = confDir
	cfg.CacheDir = filepath.Join(root, "cache")
	cfg.HairpinMode = HairpinVeth
	cfg.MTU = 1400
	m, err := New(cfg, nil)
	assert.NilError(t, err)
	ctx := context.Background()
	assert.NilError(t, m.Status(ctx))

	pn := PodNetwork{Namespace: "default", Name: "real", UID: "u1", SandboxID: "dkpintest-sandbox", NetNS: nsPath}
	res, err := m.SetUp(ctx, pn)
	assert.NilError(t, err)
	assert.Equal(t, len(res.IPs), 1, "%v", res.IPs)
	ip := res.IPs[0]
	_, subnet, _ := net.ParseCIDR(realSubnet)
	assert.Assert(t, ip.To4() != nil && subnet.Contains(ip), "%s not in %s", ip, realSubnet)

	// What the namespace looks like: eth0 with that address and the MTU, lo up, no default route.
	assert.Check(t, is.Contains(inNS("ip", "-o", "-4", "addr", "show", "dev", "eth0"), ip.String()+"/24"))
	assert.Check(t, is.Equal(inNS("cat", "/sys/class/net/eth0/mtu"), "1400"))
	assert.Check(t, is.Contains(inNS("ip", "-o", "link", "show", "lo"), "UP"))
	assert.Check(t, is.Equal(inNS("ip", "route", "show", "default"), ""))
	// hairpin-veth: the pod's port on the bridge reflects traffic back.
	ports, err := os.ReadDir("/sys/class/net/" + realBridge + "/brif")
	assert.NilError(t, err)
	assert.Equal(t, len(ports), 1)
	hairpin, err := os.ReadFile(filepath.Join("/sys/class/net", realBridge, "brif", ports[0].Name(), "hairpin_mode"))
	assert.NilError(t, err)
	assert.Check(t, is.Equal(strings.TrimSpace(string(hairpin)), "1"))
	// The pod reaches its gateway on the bridge (nothing leaves this machine).
	if _, err := exec.LookPath("ping"); err == nil {
		inNS("ping", "-c", "1", "-W", "2", "10.213.0.1")
	}

	st, err := m.PodNetworkStatus(ctx, pn.SandboxID)
	assert.NilError(t, err)
	assert.DeepEqual(t, st, res)

	lease := filepath.Join(dataDir, realNetwork, ip.String())
	_, err = os.Stat(lease)
	assert.NilError(t, err, "host-local holds the address")

	assert.NilError(t, m.TearDown(ctx, pn))
	_, err = os.Stat(lease)
	assert.Check(t, os.IsNotExist(err), "address released: %v", err)
	assert.Check(t, is.Equal(inNS("ip", "-o", "link", "show"), inNS("ip", "-o", "link", "show", "lo")), "only lo is left")
	_, err = m.PodNetworkStatus(ctx, pn.SandboxID)
	assert.Check(t, cerrdefs.IsNotFound(err))
	assert.NilError(t, m.TearDown(ctx, pn), "second TearDown")

	// A pod whose namespace is gone before TearDown still gets its address released.
	pn2 := pn
	pn2.SandboxID = "dkpintest-sandbox2"
	res2, err := m.SetUp(ctx, pn2)
	assert.NilError(t, err)
	sh(t, "ip", "netns", "delete", nsName)
	assert.NilError(t, m.TearDown(ctx, pn2))
	_, err = os.Stat(filepath.Join(dataDir, realNetwork, res2.IPs[0].String()))
	assert.Check(t, os.IsNotExist(err), "address released: %v", err)
}
