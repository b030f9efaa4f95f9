//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The node tests (TestNode...) run kubelet itself, standalone (static pods, no API server), against
// our binary: hack/kubelet.sh contains it. They run when E2E_NODE=1 (hack/node-e2e.sh, make node-e2e),
// with KUBELET_BIN built by hack/install-kubelet.sh.

const (
	nodeName = "dockpin-node" // kubelet's --hostname-override: static pod names end in "-" + nodeName
	nodeNS   = "node-e2e"     // the static pods' namespace
)

func requireNode(t testing.TB) {
	t.Helper()
	if os.Getenv("E2E_NODE") != "1" {
		t.Skip("kubelet node tests run with E2E_NODE=1 (make node-e2e)")
	}
	if _, err := os.Stat(os.Getenv("KUBELET_BIN")); err != nil {
		t.Fatalf("KUBELET_BIN: %v (hack/install-kubelet.sh builds it)", err)
	}
}

// nodeOpts are what a test changes in a node.
type nodeOpts struct {
	binary        string   // the cri-dockerd binary kubelet starts on ("": ours; upstream's takes the same flags)
	shimFlags     []string // more flags for our binary
	kubeletConfig string   // YAML lines appended to the KubeletConfiguration
	kubeletArgs   string   // more kubelet flags
	// proxyBackend, when set (binary, then flags), is the CRI that runs the pods, on a socket of its
	// own; our binary is the pin proxy in front of it on kubelet's socket, with shimFlags.
	proxyBackend []string
}

// node is a cri-dockerd binary (ours unless opts.binary; CNI pods) and kubelet on its socket.
type node struct {
	t        testing.TB // the test that started it (its cleanups outlive subtests)
	opts     nodeOpts
	pn       podNet
	sockDir  string // the CRI socket's directory (the socket is cri.sock)
	endpoint string
	shimArgs []string
	shim     *shim
	backend  *shim  // the CRI behind our binary as the pin proxy (nodeOpts.proxyBackend), else nil
	dir      string // KUBELET_DIR
	port     string // kubelet's HTTPS port on 127.0.0.1
	client   *http.Client
	downOnce sync.Once
}

func startNode(t testing.TB, opts nodeOpts) *node {
	t.Helper()
	requireNode(t)
	pauseImage(t)
	if opts.binary == "" {
		opts.binary = env.binary
	}
	n := &node{t: t, opts: opts, pn: newPodNet(t), dir: t.TempDir(), sockDir: t.TempDir()}
	n.endpoint = "unix://" + filepath.Join(n.sockDir, "cri.sock")
	n.shimArgs = append(n.pn.flags(filepath.Join(t.TempDir(), "root")), "--log-level", "info")
	n.shimArgs = append(n.shimArgs, opts.shimFlags...)
	if len(opts.proxyBackend) > 0 {
		n.shimArgs = n.startProxyBackend(t)
	}
	n.shim = startBinary(t, opts.binary, n.sockDir, n.shimArgs...)
	n.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // kubelet's self-signed serving cert, on loopback
	}}
	n.startKubelet(t)
	t.Cleanup(func() { n.down(t) })
	return n
}

// kubeletSh runs hack/kubelet.sh for this node and returns its last stdout line.
func (n *node) kubeletSh(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join(env.root, "hack", "kubelet.sh")}, args...)...)
	cmd.Env = append(os.Environ(), "KUBELET_DIR="+n.dir, "CRI_ENDPOINT="+n.endpoint, "CNI_DATA_DIR="+n.pn.ipamDir,
		"KUBELET_PORT="+n.port, "KUBELET_NODE_NAME="+nodeName,
		"KUBELET_CONFIG_EXTRA="+n.opts.kubeletConfig, "KUBELET_EXTRA_ARGS="+n.opts.kubeletArgs)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	t.Logf("hack/kubelet.sh %s: %s", strings.Join(args, " "), strings.TrimSpace(errb.String()))
	if err != nil {
		return "", fmt.Errorf("hack/kubelet.sh %s: %w", strings.Join(args, " "), err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1], nil
}

func (n *node) startKubelet(t testing.TB) {
	t.Helper()
	port, err := n.kubeletSh(t, "start")
	assert.NilError(t, err, "kubelet log:\n%s", lastLines(n.kubeletLog(), 40))
	n.port = port
}

func (n *node) stopKubelet(t testing.TB) {
	t.Helper()
	_, err := n.kubeletSh(t, "stop")
	assert.NilError(t, err)
}

// restartShim stops the node's binary (SIGTERM, or SIGKILL when kill) and starts it again on the
// same socket and root, under the running kubelet.
func (n *node) restartShim(t testing.TB, kill bool) {
	t.Helper()
	n.replaceShim(t, n.opts.binary, kill)
}

// replaceShim stops the node's binary (SIGTERM, or SIGKILL when kill) and starts binary in its
// place: the same socket, root directory, CNI directories and flags, under the running kubelet.
func (n *node) replaceShim(t testing.TB, binary string, kill bool) {
	t.Helper()
	if kill {
		n.shim.kill(t)
	} else {
		n.shim.stop(t)
	}
	n.opts.binary = binary
	// Started for the whole test, not the subtest that restarts it; its cleanup runs before the
	// node's first one, so the node is taken down before it too.
	n.shim = startBinary(n.t, binary, n.sockDir, n.shimArgs...)
	n.t.Cleanup(func() { n.down(n.t) })
}

// down removes every manifest, waits for kubelet to stop the pods, stops kubelet, removes what
// is left of the pods through our binary and fails on anything kubelet or the pods left behind.
func (n *node) down(t testing.TB) {
	n.downOnce.Do(func() {
		if t.Failed() {
			t.Logf("kubelet log (last lines):\n%s", lastLines(n.kubeletLog(), 80))
		}
		entries, _ := os.ReadDir(filepath.Join(n.dir, "manifests"))
		for _, e := range entries {
			_ = os.Remove(filepath.Join(n.dir, "manifests", e.Name()))
		}
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			ready := n.sandboxes(t, "", true)
			if len(ready) > 0 {
				return poll.Continue("%d sandboxes still ready", len(ready))
			}
			return poll.Success()
		}, poll.WithTimeout(60*time.Second), poll.WithDelay(500*time.Millisecond))
		n.stopKubelet(t)
		for _, sb := range n.sandboxes(t, "", false) {
			stopAndRemovePod(t, n.shim, sb.GetId())
		}
		_, err := n.kubeletSh(t, "check-leaks")
		assert.Check(t, err)
	})
}

func (n *node) kubeletLog() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "kubelet.log"))
	return string(b)
}

// apply writes pod as a static pod manifest (JSON is YAML), atomically: kubelet reads the directory every second.
func (n *node) apply(t testing.TB, pod map[string]any) {
	t.Helper()
	name := pod["metadata"].(map[string]any)["name"].(string)
	b, err := json.MarshalIndent(pod, "", "  ")
	assert.NilError(t, err)
	tmp := filepath.Join(n.dir, "manifests", "."+name+".tmp")
	assert.NilError(t, os.WriteFile(tmp, b, 0o644))
	assert.NilError(t, os.Rename(tmp, filepath.Join(n.dir, "manifests", name+".json")))
}

func (n *node) deleteManifest(t testing.TB, name string) {
	t.Helper()
	assert.NilError(t, os.Remove(filepath.Join(n.dir, "manifests", name+".json")))
}

// staticPod is a pod manifest in nodeNS.
func staticPod(name string, containers ...map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": nodeNS},
		"spec": map[string]any{
			"containers":                    containers,
			"terminationGracePeriodSeconds": 2,
		},
	}
}

// counterContainer runs citool's counter ("line N" every 200ms) from the pause image, never pulled.
func counterContainer(name string) map[string]any {
	return map[string]any{
		"name": name, "image": pauseRef, "imagePullPolicy": "Never",
		"command": []string{"/citool", "counter"},
		"env":     []map[string]string{{"name": "INTERVAL", "value": "200ms"}},
	}
}

// podName is kubelet's name for the static pod of manifest name.
func podName(name string) string { return name + "-" + nodeName }

// podLog is kubelet's log file of a container's attempt in static pod name.
func (n *node) podLog(name, uid, container string, attempt int) string {
	return filepath.Join(n.dir, "pod-logs", fmt.Sprintf("%s_%s_%s", nodeNS, podName(name), uid), container, fmt.Sprintf("%d.log", attempt))
}

// sandboxes lists the sandboxes of static pod name ("": all), only ready ones when ready.
func (n *node) sandboxes(t testing.TB, name string, ready bool) []*runtimeapi.PodSandbox {
	t.Helper()
	f := &runtimeapi.PodSandboxFilter{}
	if name != "" {
		f.LabelSelector = map[string]string{"io.kubernetes.pod.name": podName(name)}
	}
	if ready {
		f.State = &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}
	}
	resp, err := n.shim.rt.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{Filter: f})
	assert.NilError(t, err)
	return resp.GetItems()
}

// containers lists the containers of a sandbox (all states).
func (n *node) containers(t testing.TB, sandboxID string) []*runtimeapi.Container {
	t.Helper()
	resp, err := n.shim.rt.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{
		Filter: &runtimeapi.ContainerFilter{PodSandboxId: sandboxID}})
	assert.NilError(t, err)
	return resp.GetContainers()
}

// runningPod is what our binary reports of a pod kubelet runs.
type runningPod struct {
	sandbox    *runtimeapi.PodSandbox
	ip         string
	containers map[string]*runtimeapi.Container // running ones, by name
}

// waitRunning waits until static pod name has one ready sandbox with every named container running.
func (n *node) waitRunning(t testing.TB, name string, containers ...string) runningPod {
	t.Helper()
	var p runningPod
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		sbs := n.sandboxes(t, name, true)
		if len(sbs) != 1 {
			return poll.Continue("%d ready sandboxes for %s", len(sbs), name)
		}
		p = runningPod{sandbox: sbs[0], containers: map[string]*runtimeapi.Container{}}
		for _, c := range n.containers(t, sbs[0].GetId()) {
			if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
				p.containers[c.GetMetadata().GetName()] = c
			}
		}
		for _, c := range containers {
			if p.containers[c] == nil {
				return poll.Continue("container %s of %s not running", c, name)
			}
		}
		return poll.Success()
	}, poll.WithTimeout(90*time.Second), poll.WithDelay(500*time.Millisecond))
	p.ip = podStatus(t, n.shim, p.sandbox.GetId()).GetNetwork().GetIp()
	return p
}

// get is a GET on kubelet's HTTP API.
func (n *node) get(t testing.TB, path string) (int, []byte) {
	t.Helper()
	return n.do(t, http.MethodGet, path)
}

func (n *node) do(t testing.TB, method, path string) (int, []byte) {
	t.Helper()
	return httpDo(t, n.client, method, "https://127.0.0.1:"+n.port+path)
}

// kubeletLogLines are the lines of kubelet's log that match re.
func (n *node) kubeletLogLines(re *regexp.Regexp) []string {
	var out []string
	for _, l := range strings.Split(n.kubeletLog(), "\n") {
		if re.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// TestNodeImageGC lets kubelet's image garbage collection loose on the engine: every image a pin
// source pins must stay, with the image a running container uses; an unpinned unused image goes.
// Eviction-mode GC for speed: imagefs.available below 99% is always
// "pressure", so the eviction manager runs the image GC's delete-unused pass at start and every
// 10-30 s, and --minimum-image-ttl-duration=0s (only the deprecated flag sets 0) makes every image
// old enough.
func TestNodeImageGC(t *testing.T) {
	requireNode(t)
	pauseImage(t)
	dir := t.TempDir()

	kept := map[string]string{"sandbox image": imageID(t, pauseRef)}
	kept["image-config label"] = importImage(t, "node/gc-config-label:1", pinLabel+"=pinned")
	kept["--pinned-images"] = importImage(t, "node/gc-flag:1")
	kept["pins file"] = importImage(t, "node/gc-file:1")
	pinsFile := filepath.Join(dir, "pins")
	assert.NilError(t, os.WriteFile(pinsFile, []byte("# node e2e\nnode/gc-file:1\n"), 0o644))
	kept["preload archive"] = importImage(t, "node/gc-preload:1")
	preloadDir := filepath.Join(dir, "preload")
	assert.NilError(t, os.MkdirAll(preloadDir, 0o755))
	docker(t, "save", "-o", filepath.Join(preloadDir, "gc.tar"), "node/gc-preload:1")
	if env.store == "containerd" {
		kept["containerd record label"] = importImage(t, "node/gc-ctrd:1")
		ctr(t, "images", "label", "docker.io/node/gc-ctrd:1", pinLabel+"=pinned")
	}
	// The image of a running container: the pause image's files under another config (a label), so another ID.
	build := exec.Command("docker", "-H", env.dockerHost, "build", "-q", "-t", "node/gc-used:1", "-")
	build.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	build.Stdin = strings.NewReader("FROM " + pauseRef + "\nLABEL dockpin.test/node-gc=used\n")
	out, err := build.CombinedOutput()
	assert.NilError(t, err, "%s", out)
	kept["used by a running container"] = imageID(t, "node/gc-used:1")
	removeAtEnd(t, "node/gc-used:1")
	unpinned := importImage(t, "node/gc-unpinned:1")

	// kubelet without GC pressure first, until the pod using node/gc-used:1 runs (GC would remove
	// that image before the pod starts otherwise); then restarted with it (adopting the pod).
	n := startNode(t, nodeOpts{
		shimFlags: []string{"--pinned-images", "node/gc-flag:1", "--pinned-images-file", pinsFile,
			"--preload-images-dir", preloadDir},
	})
	waitAllPinned(t, n.shim, map[string]string{
		"sandbox image": kept["sandbox image"], "--pinned-images": kept["--pinned-images"], "pins file": kept["pins file"],
		"preload archive": kept["preload archive"], "image-config label": kept["image-config label"],
	})
	c := counterContainer("user")
	c["image"] = "node/gc-used:1"
	n.apply(t, staticPod("gc-user", c))
	n.waitRunning(t, "gc-user", "user")
	n.stopKubelet(t)
	n.opts.kubeletConfig = "evictionHard:\n  imagefs.available: \"99%\"\nevictionPressureTransitionPeriod: 5s"
	n.opts.kubeletArgs = "--minimum-image-ttl-duration=0s"
	n.startKubelet(t)

	start := time.Now()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if _, err := dockerErr(nil, "image", "inspect", unpinned); err == nil {
			return poll.Continue("the unpinned unused image %s is still there", unpinned)
		}
		return poll.Success()
	}, poll.WithTimeout(120*time.Second), poll.WithDelay(time.Second))
	t.Logf("kubelet removed the unpinned image %s after %s", unpinned, time.Since(start).Round(time.Second))
	// Another GC pass or two (the eviction manager runs every 10 s here) for any wrong removal to show.
	time.Sleep(25 * time.Second)
	n.waitRunning(t, "gc-user", "user")
	for why, id := range kept {
		_, err := dockerErr(nil, "image", "inspect", id)
		assert.Check(t, err, "image %s kept by %s was removed", id, why)
	}
	gc := n.kubeletLogLines(regexp.MustCompile(`image_gc_manager\.go`))
	t.Logf("kubelet's image GC log (%d lines):\n%s", len(gc), strings.Join(gc, "\n"))
	passes := n.kubeletLogLines(regexp.MustCompile(`"Attempting to delete unused images"`))
	assert.Check(t, len(passes) >= 2, "image GC passes: %d", len(passes))
	for _, l := range n.kubeletLogLines(regexp.MustCompile(`"Removing image`)) {
		assert.Check(t, strings.Contains(l, unpinned), "kubelet removed another image than the unpinned one: %s", l)
	}
}
