//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// bridgeGateway is the host's address on the CNI bridge (hack/cni.sh: isGateway).
const bridgeGateway = "10.88.0.1"

// freePort is a TCP port nothing on the host listens on now (the kernel's pick).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	assert.NilError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	assert.NilError(t, l.Close())
	return port
}

// hasLocalAddr tells whether one of the node's interfaces has address ip (traffic to it stays here).
func hasLocalAddr(t *testing.T, ip string) bool {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	assert.NilError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(net.ParseIP(ip)) {
			return true
		}
	}
	return false
}

// refused checks that nothing answers on addr yet (so that an answer later is the pod's).
func refused(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err == nil {
		_ = c.Close()
	}
	assert.Assert(t, err != nil, "something already listens on %s", addr)
}

// httpdOn runs citool's httpd on port, declared as a container port with hostPort.
func httpdOn(name string, port, hostPort int) map[string]any {
	return map[string]any{
		"name": name, "image": pauseRef, "imagePullPolicy": "Never",
		"command": []string{"/citool", "httpd"},
		"env":     []map[string]string{{"name": "PORT", "value": strconv.Itoa(port)}},
		"ports":   []map[string]any{{"containerPort": port, "hostPort": hostPort, "protocol": "TCP"}},
	}
}

// netns is the network namespace (its /proc link, "net:[inode]") of a process.
func netns(t *testing.T, pid string) string {
	t.Helper()
	link, err := os.Readlink("/proc/" + pid + "/ns/net")
	assert.NilError(t, err)
	return link
}

// containerNetns is the network namespace of an engine container's process.
func containerNetns(t *testing.T, id string) string {
	t.Helper()
	return netns(t, docker(t, "inspect", "--format", "{{.State.Pid}}", id))
}

// TestNodeHostNetwork (G): a hostNetwork pod runs in the node's network namespace, and a CNI pod's
// hostPort reaches it from the node's loopback and bridge addresses (the portmap plugin).
func TestNodeHostNetwork(t *testing.T) {
	n := startNode(t, nodeOpts{})
	hostPort, podHostPort := freePort(t), freePort(t)
	for podHostPort == hostPort {
		podHostPort = freePort(t)
	}
	// Nothing on the node listens on either port yet (on loopback only: the bridge may not exist
	// before the first pod, and its address would then be routed off this machine).
	refused(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(hostPort)))
	refused(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(podHostPort)))
	hostNet := staticPod("hostnet", httpdOn("httpd", hostPort, hostPort))
	hostNet["spec"].(map[string]any)["hostNetwork"] = true
	n.apply(t, hostNet)
	n.apply(t, staticPod("hostport", httpdOn("httpd", 8080, podHostPort)))
	h := n.waitRunning(t, "hostnet", "httpd")
	p := n.waitRunning(t, "hostport", "httpd")
	hostNS := netns(t, "self")

	t.Run("G/hostNetwork pod in the node's namespace", func(t *testing.T) {
		st := podStatus(t, n.shim, h.sandbox.GetId())
		assert.Check(t, is.Equal(st.GetLinux().GetNamespaces().GetOptions().GetNetwork(), runtimeapi.NamespaceMode_NODE))
		assert.Check(t, is.Equal(h.ip, ""), "a host-network sandbox has no IP of its own (kubelet uses the node's)")
		assert.Check(t, is.Equal(docker(t, "inspect", "--format", "{{.HostConfig.NetworkMode}}", h.sandbox.GetId()), "host"))
		assert.Check(t, is.Equal(containerNetns(t, h.sandbox.GetId()), hostNS), "the sandbox's network namespace")
		assert.Check(t, is.Equal(containerNetns(t, h.containers["httpd"].GetId()), hostNS), "the container's network namespace")
		// Loopback is per namespace: only a process in the node's answers on the node's 127.0.0.1.
		waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/", hostPort))
		// No pod address was leased for it: only the CNI pod holds one.
		assert.Check(t, is.DeepEqual(n.pn.leasedIPs(t), []string{p.ip}))
	})

	t.Run("G/hostPort on the node's addresses", func(t *testing.T) {
		ip := net.ParseIP(p.ip)
		assert.Assert(t, ip != nil && podSubnet.Contains(ip), "pod IP %q not in %s", p.ip, podSubnet)
		assert.Check(t, is.Equal(podStatus(t, n.shim, p.sandbox.GetId()).GetLinux().GetNamespaces().GetOptions().GetNetwork(),
			runtimeapi.NamespaceMode_POD))
		assert.Check(t, containerNetns(t, p.containers["httpd"].GetId()) != hostNS, "a CNI pod has a network namespace of its own")
		waitHTTP(t, "http://"+net.JoinHostPort(p.ip, "8080")+"/")
		// Nothing listened on the port before the pod: the portmap plugin's DNAT leads it to the pod.
		waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/", podHostPort))
		assert.Assert(t, hasLocalAddr(t, bridgeGateway), "the CNI bridge's address %s is not the node's", bridgeGateway)
		waitHTTP(t, fmt.Sprintf("http://%s:%d/", bridgeGateway, podHostPort))
	})
}
