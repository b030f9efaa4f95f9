//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// pauseRef is the sandbox image the pod tests use: citool's pause, imported offline.
const pauseRef = "dockpin.test/pause:e2e"

// podSubnet is the CNI subnet hack/cni.sh configures.
var podSubnet = &net.IPNet{IP: net.IPv4(10, 88, 0, 0), Mask: net.CIDRMask(16, 32)}

var pauseOnce sync.Once

// pauseImage imports a pause image into the engine once per run (kept until the
// engine stops, like the sandbox image of a node). It also holds /citool, whose
// "httpd" personality the container tests run.
func pauseImage(t testing.TB) {
	t.Helper()
	pauseOnce.Do(func() {
		dir := t.TempDir()
		bin := filepath.Join(dir, "citool")
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./hack/critest/citool")
		cmd.Dir, cmd.Env = env.root, append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		assert.NilError(t, err, string(out))
		assert.NilError(t, os.Link(bin, filepath.Join(dir, "pause")))
		tarball := filepath.Join(dir, "rootfs.tar")
		out, err = exec.Command("tar", "-C", dir, "-cf", tarball, "pause", "citool").CombinedOutput()
		assert.NilError(t, err, string(out))
		docker(t, "import", "-c", `ENTRYPOINT ["/pause"]`, tarball, pauseRef)
	})
}

// podNet is one private CNI setup: config dir, cache dir and IPAM state.
type podNet struct {
	confDir, cacheDir, ipamDir string
}

func newPodNet(t testing.TB) podNet {
	t.Helper()
	dir := t.TempDir()
	n := podNet{confDir: filepath.Join(dir, "net.d"), cacheDir: filepath.Join(dir, "cache"), ipamDir: filepath.Join(dir, "net.d", "ipam")}
	_, err := hackOutput("cni.sh", "config", n.confDir)
	assert.NilError(t, err)
	return n
}

func (n podNet) flags(root string) []string {
	return []string{
		"--network-plugin", "cni", "--cni-bin-dir", "/usr/lib/cni", "--cni-conf-dir", n.confDir,
		"--cni-cache-dir", n.cacheDir, "--cri-dockerd-root-directory", root, "--pod-infra-container-image", pauseRef,
	}
}

// leasedIPs are the pod IPs host-local holds in n.
func (n podNet) leasedIPs(t testing.TB) []string {
	t.Helper()
	var ips []string
	entries, err := os.ReadDir(filepath.Join(n.ipamDir, "dockpin"))
	if os.IsNotExist(err) {
		return nil
	}
	assert.NilError(t, err)
	for _, e := range entries {
		if net.ParseIP(e.Name()) != nil {
			ips = append(ips, e.Name())
		}
	}
	return ips
}

func podConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:    &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "e2e", Uid: "uid-" + name, Attempt: 1},
		Hostname:    name,
		Labels:      map[string]string{"app": name},
		Annotations: map[string]string{"note": "hello"},
		DnsConfig:   &runtimeapi.DNSConfig{Servers: []string{"10.88.0.53"}, Searches: []string{"e2e.svc.cluster.local"}, Options: []string{"ndots:5"}},
		Linux:       &runtimeapi.LinuxPodSandboxConfig{},
	}
}

func runPod(t testing.TB, s *shim, cfg *runtimeapi.PodSandboxConfig) string {
	t.Helper()
	resp, err := s.rt.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	assert.NilError(t, err)
	return resp.GetPodSandboxId()
}

func podStatus(t testing.TB, s *shim, id string) *runtimeapi.PodSandboxStatus {
	t.Helper()
	resp, err := s.rt.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	assert.NilError(t, err)
	return resp.GetStatus()
}

func stopAndRemovePod(t testing.TB, s *shim, id string) {
	t.Helper()
	ctx := context.Background()
	_, err := s.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	assert.NilError(t, err)
	_, err = s.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	assert.NilError(t, err)
}

// TestPodSandboxLifecycle runs a CNI sandbox and checks what kubelet and an operator
// see: the engine container as upstream names and labels it, the checkpoint bytes,
// the pod's resolv.conf and IP, and the CRI's idempotence rules.
func TestPodSandboxLifecycle(t *testing.T) {
	pauseImage(t)
	pn := newPodNet(t)
	root := filepath.Join(t.TempDir(), "root")
	s := startShim(t, pn.flags(root)...)
	ctx := context.Background()

	cfg := podConfig("lifecycle")
	cfg.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: 18080}}
	id := runPod(t, s, cfg)

	st := podStatus(t, s, id)
	assert.Equal(t, st.GetState(), runtimeapi.PodSandboxState_SANDBOX_READY)
	assert.Equal(t, st.GetMetadata().GetName(), "lifecycle")
	assert.Equal(t, st.GetMetadata().GetUid(), "uid-lifecycle")
	assert.Equal(t, st.GetMetadata().GetAttempt(), uint32(1))
	assert.Equal(t, st.GetLabels()["app"], "lifecycle")
	assert.Equal(t, st.GetAnnotations()["note"], "hello")
	_, internal := st.GetLabels()["io.kubernetes.docker.type"]
	assert.Assert(t, !internal, "internal labels must not reach the CRI: %v", st.GetLabels())
	ip := net.ParseIP(st.GetNetwork().GetIp())
	assert.Assert(t, ip != nil && podSubnet.Contains(ip), "pod IP %q not in %s", st.GetNetwork().GetIp(), podSubnet)
	assert.DeepEqual(t, pn.leasedIPs(t), []string{ip.String()})

	// The engine's view: upstream's name, labels and OOM score; CNI owns the network.
	name := docker(t, "inspect", "--format", "{{.Name}}", id)
	assert.Equal(t, name, "/k8s_POD_lifecycle_e2e_uid-lifecycle_1")
	labels := docker(t, "inspect", "--format", `{{index .Config.Labels "io.kubernetes.docker.type"}} {{index .Config.Labels "io.kubernetes.container.name"}} {{index .Config.Labels "annotation.note"}} {{.HostConfig.NetworkMode}} {{.HostConfig.OomScoreAdj}} {{.Config.Hostname}}`, id)
	assert.Equal(t, labels, "podsandbox POD hello none -998 lifecycle")
	resolv, err := os.ReadFile(docker(t, "inspect", "--format", "{{.ResolvConfPath}}", id))
	assert.NilError(t, err)
	assert.Equal(t, string(resolv), "nameserver 10.88.0.53\nsearch e2e.svc.cluster.local\noptions ndots:5\n")

	// The checkpoint, byte for byte as upstream writes it (checksum: upstream-facts.md's vector
	// for this port mapping).
	cp, err := os.ReadFile(filepath.Join(root, "sandbox", id))
	assert.NilError(t, err)
	assert.Equal(t, string(cp), `{"version":"v1","name":"lifecycle","namespace":"e2e","data":{"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":18080}]},"checksum":2344035810}`)
	fi, err := os.Stat(filepath.Join(root, "sandbox", id))
	assert.NilError(t, err)
	assert.Equal(t, fi.Mode().Perm(), os.FileMode(0o600))

	// Stop twice: both succeed; the network is torn down and the IP released.
	for range 2 {
		_, err = s.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
		assert.NilError(t, err)
	}
	assert.Equal(t, podStatus(t, s, id).GetState(), runtimeapi.PodSandboxState_SANDBOX_NOTREADY)
	assert.Check(t, is.Len(pn.leasedIPs(t), 0))

	// Remove twice: both succeed; then the sandbox is gone: status is NotFound.
	for range 2 {
		_, err = s.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
		assert.NilError(t, err)
	}
	_, err = s.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	assert.Equal(t, status.Code(err), codes.NotFound, "status of a removed sandbox: %v", err)
	_, err = os.Stat(filepath.Join(root, "sandbox", id))
	assert.Assert(t, os.IsNotExist(err), "checkpoint left behind: %v", err)
	list, err := s.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	assert.NilError(t, err)
	for _, p := range list.GetItems() {
		assert.Assert(t, p.GetId() != id, "removed sandbox still listed")
	}
}

// TestPodSandboxSurvivesRestart restarts our binary under running sandboxes: they
// keep their ids, IPs and state, and can be stopped and removed by the new process.
func TestPodSandboxSurvivesRestart(t *testing.T) {
	pauseImage(t)
	pn := newPodNet(t)
	root := filepath.Join(t.TempDir(), "root")
	s := startShim(t, pn.flags(root)...)

	want := map[string]string{} // id -> IP
	for _, name := range []string{"restart-a", "restart-b"} {
		id := runPod(t, s, podConfig(name))
		want[id] = podStatus(t, s, id).GetNetwork().GetIp()
	}
	stopped := runPod(t, s, podConfig("restart-stopped"))
	_, err := s.rt.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: stopped})
	assert.NilError(t, err)

	s.signal(t, syscall.SIGTERM)
	assert.NilError(t, s.cmd.Wait())
	s2 := startShim(t, pn.flags(root)...)

	list, err := s2.rt.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	assert.NilError(t, err)
	got := map[string]runtimeapi.PodSandboxState{}
	for _, p := range list.GetItems() {
		got[p.GetId()] = p.GetState()
	}
	for id, ip := range want {
		assert.Equal(t, got[id], runtimeapi.PodSandboxState_SANDBOX_READY, "sandbox %s after restart", id)
		assert.Equal(t, podStatus(t, s2, id).GetNetwork().GetIp(), ip, "IP of %s after restart", id)
	}
	assert.Equal(t, got[stopped], runtimeapi.PodSandboxState_SANDBOX_NOTREADY)
	for id := range want {
		stopAndRemovePod(t, s2, id)
	}
	stopAndRemovePod(t, s2, stopped)
	assert.Check(t, is.Len(pn.leasedIPs(t), 0))
}

// TestUpstreamCheckpoint hands our binary checkpoint files as upstream cri-dockerd
// writes them (hand-made from the documented format): a sandbox known only by its
// checkpoint is listed NOTREADY so kubelet removes it; a corrupt one is deleted.
func TestUpstreamCheckpoint(t *testing.T) {
	pauseImage(t)
	pn := newPodNet(t)
	root := filepath.Join(t.TempDir(), "root")
	assert.NilError(t, os.MkdirAll(filepath.Join(root, "sandbox"), 0o700))
	orphan := strings.Repeat("ab", 32)
	corrupt := strings.Repeat("cd", 32)
	write := func(id, content string) {
		assert.NilError(t, os.WriteFile(filepath.Join(root, "sandbox", id), []byte(content), 0o600))
	}
	write(orphan, `{"version":"v1","name":"upstream-pod","namespace":"default","data":{"port_mappings":[{"protocol":"tcp","container_port":80,"host_port":18080}]},"checksum":2344035810}`)
	write(corrupt, `{"version":"v1","name":"bad","namespace":"default","data":{"host_network":true},"checksum":1}`)
	s := startShim(t, pn.flags(root)...)
	ctx := context.Background()

	list, err := s.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	assert.NilError(t, err)
	var found *runtimeapi.PodSandbox
	for _, p := range list.GetItems() {
		assert.Assert(t, p.GetId() != corrupt, "corrupt checkpoint listed")
		if p.GetId() == orphan {
			found = p
		}
	}
	assert.Assert(t, found != nil, "checkpoint-only sandbox not listed: %v", list.GetItems())
	assert.Equal(t, found.GetState(), runtimeapi.PodSandboxState_SANDBOX_NOTREADY)
	assert.Equal(t, found.GetMetadata().GetName(), "upstream-pod")
	assert.Equal(t, found.GetMetadata().GetNamespace(), "default")
	_, err = os.Stat(filepath.Join(root, "sandbox", corrupt))
	assert.Assert(t, os.IsNotExist(err), "corrupt checkpoint not deleted: %v", err)

	// What kubelet does next: stop and remove it. Both succeed and the file goes.
	stopAndRemovePod(t, s, orphan)
	_, err = os.Stat(filepath.Join(root, "sandbox", orphan))
	assert.Assert(t, os.IsNotExist(err), "checkpoint not removed: %v", err)
	_, err = s.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: orphan})
	assert.Equal(t, status.Code(err), codes.NotFound, fmt.Sprint(err))
}

// TestPodSandboxAfterCrash kills a running pause container behind our back (the
// engine, the OOM killer): the sandbox is NOTREADY, and stopping and removing it
// still releases its pod IP and its veth, with the namespace already gone.
func TestPodSandboxAfterCrash(t *testing.T) {
	pauseImage(t)
	pn := newPodNet(t)
	s := startShim(t, pn.flags(filepath.Join(t.TempDir(), "root"))...)
	ctx := context.Background()
	id := runPod(t, s, podConfig("crash"))
	assert.Check(t, is.Len(pn.leasedIPs(t), 1))

	docker(t, "kill", id)
	assert.Equal(t, podStatus(t, s, id).GetState(), runtimeapi.PodSandboxState_SANDBOX_NOTREADY)
	assert.Check(t, is.Len(pn.leasedIPs(t), 1), "nothing has told CNI yet")

	// kubelet's cleanup of a dead sandbox is RemovePodSandbox, with or without a stop first.
	_, err := s.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	assert.NilError(t, err)
	assert.Check(t, is.Len(pn.leasedIPs(t), 0))
	out, err := exec.Command("ip", "-o", "link", "show", "master", "dkpin0").Output()
	assert.NilError(t, err)
	assert.Check(t, !strings.Contains(string(out), "veth"), "veth left on the bridge:\n%s", out)
}

// TestPodSandboxWithCrictl checks the sandbox as an operator sees it with crictl.
func TestPodSandboxWithCrictl(t *testing.T) {
	pauseImage(t)
	pn := newPodNet(t)
	s := startShim(t, pn.flags(filepath.Join(t.TempDir(), "root"))...)
	id := runPod(t, s, podConfig("crictl"))
	t.Cleanup(func() { stopAndRemovePod(t, s, id) })

	var pods struct {
		Items []struct {
			ID       string `json:"id"`
			State    string `json:"state"`
			Metadata struct {
				Name, Namespace, UID string
			} `json:"metadata"`
			Labels map[string]string `json:"labels"`
		} `json:"items"`
	}
	assert.NilError(t, json.Unmarshal([]byte(s.crictl(t, "pods", "-o", "json", "--name", "crictl")), &pods))
	assert.Assert(t, is.Len(pods.Items, 1))
	assert.Equal(t, pods.Items[0].ID, id)
	assert.Equal(t, pods.Items[0].State, "SANDBOX_READY")
	assert.Equal(t, pods.Items[0].Metadata.Namespace, "e2e")
	assert.Equal(t, pods.Items[0].Labels["app"], "crictl")

	var inspect struct {
		Status struct {
			Network struct {
				IP string `json:"ip"`
			} `json:"network"`
		} `json:"status"`
	}
	assert.NilError(t, json.Unmarshal([]byte(s.crictl(t, "inspectp", "-o", "json", id)), &inspect))
	assert.Equal(t, inspect.Status.Network.IP, podStatus(t, s, id).GetNetwork().GetIp())
	assert.Assert(t, podSubnet.Contains(net.ParseIP(inspect.Status.Network.IP)))
}

// TestSandboxNameConflict: a sandbox whose engine name is held by another container
// behaves as upstream cri-dockerd's on the real engine: a stopped holder is removed and
// the create fails (kubelet retries, and the retry gets the plain name); a running
// holder fails the create and is left alone.
func TestSandboxNameConflict(t *testing.T) {
	pauseImage(t)
	pn := newPodNet(t)
	s := startShim(t, pn.flags(filepath.Join(t.TempDir(), "root"))...)
	ctx := context.Background()
	cfg := podConfig("conflict")
	name := "k8s_POD_conflict_e2e_uid-conflict_1"

	holder := docker(t, "create", "--name", name, "--network", "none", pauseRef)
	t.Cleanup(func() { _, _ = dockerErr(nil, "rm", "-f", holder) })
	_, err := s.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	assert.Equal(t, status.Code(err), codes.AlreadyExists, "%v", err)
	_, err = dockerErr(nil, "inspect", holder)
	assert.Check(t, err != nil && strings.Contains(strings.ToLower(err.Error()), "no such"), "the stopped holder is removed: %v", err)
	id := runPod(t, s, cfg) // kubelet's retry
	t.Cleanup(func() { stopAndRemovePod(t, s, id) })
	assert.Equal(t, docker(t, "inspect", "--format", "{{.Name}}", id), "/"+name)

	// Now the name is held by the running sandbox itself: a second create fails and
	// makes no second sandbox with a random suffix.
	_, err = s.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	assert.Equal(t, status.Code(err), codes.AlreadyExists, "%v", err)
	assert.Equal(t, docker(t, "inspect", "--format", "{{.State.Status}}", id), "running")
	all := docker(t, "ps", "-a", "--format", "{{.Names}}", "--filter", "name=k8s_POD_conflict_")
	assert.Assert(t, !regexp.MustCompile(`_[0-9a-f]{8}$`).MatchString(all), "suffixed sandbox made: %s", all)
}
