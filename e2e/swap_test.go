//go:build e2e

package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The drop-in promise, both ways, against upstream cri-dockerd's own binary
// (hack/install-upstream.sh; hack/e2e.sh passes it as UPSTREAM_CRI_DOCKERD_BIN): one
// binary runs CNI pods, is stopped with SIGTERM, and the other takes over on the same
// socket path, root directory (checkpoints) and CNI config and cache directories.

func upstreamBinary(t *testing.T) string {
	t.Helper()
	if env.upstream == "" {
		t.Skip("UPSTREAM_CRI_DOCKERD_BIN not set (hack/e2e.sh builds it with hack/install-upstream.sh)")
	}
	return env.upstream
}

// swapPods are the pods one binary starts for the other to take over: "web" with
// citool's httpd in it, and a plain one.
type swapPods struct {
	web, plain    string // sandbox ids
	container     string // httpd in web
	webCfg        *runtimeapi.PodSandboxConfig
	plainCfg      *runtimeapi.PodSandboxConfig
	ips           map[string]string // sandbox id -> pod IP
	createdByTest []string          // every sandbox, for the cleanup of a failed test
}

// cleanupWith removes the pods through s when the test ends, before s is stopped (a
// failed test must not leave pods to the rest of the suite); it does nothing after
// removeAll.
func (p *swapPods) cleanupWith(t *testing.T, s *shim) {
	t.Cleanup(func() {
		if s.cmd.ProcessState != nil {
			return
		}
		ctx := context.Background()
		for _, id := range p.createdByTest {
			_, _ = s.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
			_, _ = s.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
		}
	})
}

func startSwapPods(t *testing.T, s *shim, prefix string) *swapPods {
	t.Helper()
	p := &swapPods{webCfg: podConfig(prefix + "-web"), plainCfg: podConfig(prefix + "-plain"), ips: map[string]string{}}
	p.webCfg.LogDirectory = t.TempDir()
	p.cleanupWith(t, s)
	p.web = runPod(t, s, p.webCfg)
	p.createdByTest = append(p.createdByTest, p.web)
	p.plain = runPod(t, s, p.plainCfg)
	p.createdByTest = append(p.createdByTest, p.plain)
	p.container = startContainer(t, s, p.web, p.webCfg, httpdContainer("httpd", "8080", "httpd.log"))
	for _, id := range []string{p.web, p.plain} {
		ip := podStatus(t, s, id).GetNetwork().GetIp()
		assert.Assert(t, podSubnet.Contains(net.ParseIP(ip)), "pod %s IP %q", id, ip)
		p.ips[id] = ip
	}
	assert.Assert(t, p.ips[p.web] != p.ips[p.plain])
	waitHTTP(t, "http://"+net.JoinHostPort(p.ips[p.web], "8080")+"/")
	return p
}

// checkTakenOver checks that s, the binary that took over, sees the pods as the
// other binary left them: READY with the same IPs, the container RUNNING and serving.
func (p *swapPods) checkTakenOver(t *testing.T, s *shim) {
	t.Helper()
	p.cleanupWith(t, s)
	ctx := context.Background()
	list, err := s.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	assert.NilError(t, err)
	state := map[string]runtimeapi.PodSandboxState{}
	for _, sb := range list.GetItems() {
		state[sb.GetId()] = sb.GetState()
	}
	for id, ip := range p.ips {
		assert.Check(t, is.Equal(state[id], runtimeapi.PodSandboxState_SANDBOX_READY), "sandbox %s", id)
		st := podStatus(t, s, id)
		assert.Check(t, is.Equal(st.GetState(), runtimeapi.PodSandboxState_SANDBOX_READY), "status of sandbox %s", id)
		assert.Check(t, is.Equal(st.GetNetwork().GetIp(), ip), "IP of sandbox %s (kubelet replaces a sandbox whose IP changed or is empty)", id)
	}
	cs, err := s.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: p.container})
	assert.NilError(t, err)
	assert.Check(t, is.Equal(cs.GetStatus().GetState(), runtimeapi.ContainerState_CONTAINER_RUNNING))
	ctrs, err := s.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: p.web}})
	assert.NilError(t, err)
	assert.Check(t, is.Len(ctrs.GetContainers(), 1))
	waitHTTP(t, "http://"+net.JoinHostPort(p.ips[p.web], "8080")+"/")
}

// removeAll stops and removes the pods through s, which must release their IPs and veths.
func (p *swapPods) removeAll(t *testing.T, s *shim, pn podNet, extra ...string) {
	t.Helper()
	for _, id := range append([]string{p.web, p.plain}, extra...) {
		stopAndRemovePod(t, s, id)
	}
	assert.Check(t, is.Len(pn.leasedIPs(t), 0), "host-local leases left")
	out, err := exec.Command("ip", "-o", "link", "show", "master", "dkpin0").Output()
	assert.NilError(t, err)
	assert.Check(t, !strings.Contains(string(out), "veth"), "veth left on the bridge:\n%s", out)
}

// cacheEntries lists libcni's cache entries (results/) and logs them with their content.
func cacheEntries(t *testing.T, pn podNet, what string) []string {
	t.Helper()
	dir := filepath.Join(pn.cacheDir, "results")
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	assert.NilError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		assert.NilError(t, err)
		t.Logf("%s: CNI cache %s:\n%s", what, e.Name(), b)
	}
	sort.Strings(names)
	return names
}

// TestSwapUpstreamToOurs: upstream runs the pods; ours takes over, sees them as kubelet
// needs (same ids READY, same IPs: an empty or changed IP makes kubelet replace the
// sandbox), stops and removes them releasing their IPs and veths, and runs new ones.
func TestSwapUpstreamToOurs(t *testing.T) {
	up := upstreamBinary(t)
	pauseImage(t)
	pn := newPodNet(t)
	root, sock := filepath.Join(t.TempDir(), "root"), t.TempDir()
	u := startBinary(t, up, sock, pn.flags(root)...)
	pods := startSwapPods(t, u, "up")

	// Upstream's layout: two entries per sandbox, both under eth0.
	names := cacheEntries(t, pn, "upstream")
	for _, id := range []string{pods.web, pods.plain} {
		assert.Check(t, is.Contains(names, "dockpin-"+id+"-eth0"))
		assert.Check(t, is.Contains(names, "cni-loopback-"+id+"-eth0"))
	}
	u.stop(t)

	o := startBinary(t, env.binary, sock, pn.flags(root)...)
	pods.checkTakenOver(t, o)

	// A new pod after the swap gets an address of its own.
	fresh := runPod(t, o, podConfig("after-swap"))
	pods.createdByTest = append(pods.createdByTest, fresh)
	ip := podStatus(t, o, fresh).GetNetwork().GetIp()
	assert.Check(t, podSubnet.Contains(net.ParseIP(ip)), "new pod IP %q", ip)
	assert.Check(t, ip != pods.ips[pods.web] && ip != pods.ips[pods.plain], "new pod IP %s reused", ip)

	pods.removeAll(t, o, pn, fresh)
	// Both of upstream's entries went with the teardown, ours too.
	assert.Check(t, is.Len(cacheEntries(t, pn, "after teardown by ours"), 0))
}

// TestSwapOursToUpstream: the reverse; ours runs the pods, upstream takes over on our
// checkpoints, lists them READY with their IPs, and stops and removes them.
func TestSwapOursToUpstream(t *testing.T) {
	up := upstreamBinary(t)
	pauseImage(t)
	pn := newPodNet(t)
	root, sock := filepath.Join(t.TempDir(), "root"), t.TempDir()
	o := startBinary(t, env.binary, sock, pn.flags(root)...)
	pods := startSwapPods(t, o, "ours")
	cacheEntries(t, pn, "ours")
	o.stop(t)

	u := startBinary(t, up, sock, pn.flags(root)...)
	pods.checkTakenOver(t, u)
	pods.removeAll(t, u, pn)
	// What upstream leaves of ours: only our loopback entries (under lo, which upstream
	// never deletes; they hold no address).
	for _, name := range cacheEntries(t, pn, "after teardown by upstream") {
		assert.Check(t, strings.HasPrefix(name, "cni-loopback-") && strings.HasSuffix(name, "-lo"), "CNI cache entry left: %s", name)
	}
}
