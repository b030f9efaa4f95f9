package core

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/checkpoint"
	"github.com/dockpin/cri-dockerd/internal/core/network"
)

func networkCondition(t *testing.T, env *rtEnv) *runtimeapi.RuntimeCondition {
	t.Helper()
	resp, err := env.svc.Status(context.Background(), &runtimeapi.StatusRequest{})
	assert.NilError(t, err)
	for _, c := range resp.Status.Conditions {
		if c.Type == runtimeapi.NetworkReady {
			return c
		}
	}
	t.Fatal("no NetworkReady condition")
	return nil
}

func TestStatusNetworkReadyFromNetwork(t *testing.T) {
	env := newRTEnv(t)
	assert.Check(t, networkCondition(t, env).Status)

	env.net.StatusError(errors.New("no CNI configuration in /etc/cni/net.d"))
	c := networkCondition(t, env)
	assert.Check(t, !c.Status)
	assert.Equal(t, c.Reason, "NetworkPluginNotReady")
	assert.Check(t, is.Contains(c.Message, "no CNI configuration in /etc/cni/net.d"))

	env.net.StatusError(nil)
	assert.Check(t, networkCondition(t, env).Status)
}

func TestPodNetwork(t *testing.T) {
	md := &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "prod", Uid: "u"}
	for _, tc := range []struct {
		name  string
		pid   int
		ports []*runtimeapi.PortMapping
		want  network.PodNetwork
	}{
		{
			name: "running", pid: 42,
			want: network.PodNetwork{Namespace: "prod", Name: "web", UID: "u", SandboxID: "sb", NetNS: "/proc/42/ns/net"},
		},
		{
			name: "gone", pid: 0,
			ports: []*runtimeapi.PortMapping{
				{Protocol: runtimeapi.Protocol_SCTP, ContainerPort: 9, HostPort: 99, HostIp: "::1"},
				{ContainerPort: 8080},
			},
			want: network.PodNetwork{Namespace: "prod", Name: "web", UID: "u", SandboxID: "sb", PortMappings: []network.PortMapping{
				{Protocol: "sctp", ContainerPort: 9, HostPort: 99, HostIP: "::1"},
				{Protocol: "tcp", ContainerPort: 8080},
			}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.DeepEqual(t, podNetwork("sb", netnsPath(tc.pid), md, criPorts(tc.ports)), tc.want)
		})
	}
}

func TestHoldNetns(t *testing.T) {
	path, release := holdNetns(os.Getpid())
	assert.Check(t, strings.HasPrefix(path, fmt.Sprintf("/proc/%d/fd/", os.Getpid())), path)
	held, err := os.Stat(path)
	assert.NilError(t, err)
	own, err := os.Stat(netnsPath(os.Getpid()))
	assert.NilError(t, err)
	assert.Check(t, os.SameFile(held, own), "the path names the process's network namespace")
	release()
	assert.Check(t, !holds(t, path), "still held")

	for _, gone := range []int{0, -1, 1 << 30} {
		path, release := holdNetns(gone)
		assert.Check(t, is.Equal(path, ""), "pid %d", gone)
		release()
	}
}

// holds tells whether path names this process's network namespace (the descriptor
// holdNetns made may be reused for another file once released).
func holds(t *testing.T, path string) bool {
	t.Helper()
	own, err := os.Stat(netnsPath(os.Getpid()))
	assert.NilError(t, err)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	assert.NilError(t, err)
	return os.SameFile(fi, own)
}

func TestCheckpointPortsRoundTrip(t *testing.T) {
	cfg := rtSandboxConfig("web")
	cfg.PortMappings = []*runtimeapi.PortMapping{
		{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: 18080},
		{Protocol: runtimeapi.Protocol_UDP, ContainerPort: 53, HostPort: 5353, HostIp: "127.0.0.1"},
		{Protocol: runtimeapi.Protocol_SCTP, ContainerPort: 9, HostPort: 9999},
	}
	cp := sandboxCheckpoint(cfg)
	assert.NilError(t, cp.Verify())
	assert.Equal(t, cp.Name, "web")
	assert.Equal(t, cp.Namespace, "default")
	assert.Check(t, !cp.Data.HostNetwork)
	assert.DeepEqual(t, checkpointPorts(cp), []network.PortMapping{
		{Protocol: "tcp", ContainerPort: 80, HostPort: 18080},
		{Protocol: "udp", ContainerPort: 53, HostPort: 5353, HostIP: "127.0.0.1"},
		{Protocol: "sctp", ContainerPort: 9, HostPort: 9999},
	})
	assert.DeepEqual(t, checkpointPorts(cp), criPorts(cfg.PortMappings))
	// A checkpoint written by upstream with fields missing: the CRI's defaults.
	assert.DeepEqual(t, checkpointPorts(checkpoint.New("a", "b", &checkpoint.Data{PortMappings: []*checkpoint.PortMapping{{}}})),
		[]network.PortMapping{{Protocol: "tcp"}})
	// A null entry (valid JSON with a valid checksum) is skipped, not dereferenced.
	assert.Check(t, is.Len(checkpointPorts(checkpoint.New("a", "b", &checkpoint.Data{PortMappings: []*checkpoint.PortMapping{nil}})), 0))
}
