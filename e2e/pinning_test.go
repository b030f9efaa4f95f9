//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// pushPullDigest pushes a fresh image to the local registry, removes it and pulls it
// back through the binary's PullImage, so that it has a RepoDigest; it returns the ID
// and digest ref. The ID is the engine's: a patched upstream's PullImage returns a
// repo digest as image_ref (upstream-facts.md), ours the ID.
func pushPullDigest(t *testing.T, s *shim, repo string) (id, digestRef string) {
	t.Helper()
	ref := env.registry + "/" + env.store + "/" + repo + ":1"
	importImage(t, ref)
	docker(t, "push", "-q", ref)
	docker(t, "rmi", ref)
	_, err := s.img.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	assert.NilError(t, err)
	digests := docker(t, "image", "inspect", "--format", "{{range .RepoDigests}}{{.}} {{end}}", ref)
	digestRef = strings.Fields(digests)[0]
	assert.Assert(t, strings.Contains(digestRef, "@sha256:"), digests)
	return imageID(t, ref), digestRef
}

// TestPinnedImagesCrictl is the headline acceptance test: crictl images -o json shows
// pinned true exactly for the images that one of the pin sources names.
func TestPinnedImagesCrictl(t *testing.T) {
	puller := startShim(t)
	digestID, digestRef := pushPullDigest(t, puller, "by-digest")
	sandboxDigestID, sandboxDigestRef := pushPullDigest(t, puller, "pause-digest")

	configLabelID := importImage(t, "e2e/config-label:1", "io.cri-containerd.pinned=pinned")
	want := map[string]bool{
		importImage(t, "registry.k8s.io/pause:3.10"): true,
		configLabelID:                                                         true,
		importImage(t, "e2e/exact:1"):                                         true,
		importImage(t, "e2e/exact:2"):                                         false,
		digestID:                                                              true,
		importImage(t, "e2e/bare:1"):                                          true,
		importImage(t, "e2e/bare:2"):                                          true,
		importImage(t, "e2e/bare-other:1"):                                    false,
		importImage(t, "e2e/prefixed-a:1"):                                    true,
		importImage(t, "e2e/has-kwmagic-inside:1"):                            true,
		importImage(t, "e2e/team-label:1", "team=infra"):                      true,
		importImage(t, "e2e/team-other:1", "team=apps"):                       false,
		importImage(t, "e2e/value-true:1", "io.cri-containerd.pinned=true"):   false,
		importImage(t, "e2e/misspelled:1", "io.cri.containerd.pinned=pinned"): false,
		importImage(t, "e2e/plain:1"):                                         false,
		importImage(t, "rancher/mirrored-pause:3.6"):                          false,
		sandboxDigestID:                                                       false,
	}
	s := startShim(t,
		"--pod-infra-container-image", "registry.k8s.io/pause:3.10",
		"--pinned-images", "docker.io/e2e/exact:1,"+digestRef+",e2e/bare,e2e/prefixed-*",
		"--pinned-images", "*kwmagic*",
		"--pinned-image-labels", "team=infra",
	)
	got := s.crictlImages(t)
	for id, pinned := range want {
		img, ok := got[id]
		assert.Assert(t, ok, "image %s missing from crictl images", id)
		assert.Check(t, img.Pinned == pinned, "image %v: pinned=%v, want %v", img.RepoTags, img.Pinned, pinned)
	}
	for id, img := range got {
		if _, ours := want[id]; !ours {
			assert.Check(t, !img.Pinned, "image %v (%s) is pinned but nothing names it", img.RepoTags, id)
		}
	}
	assertStatusMatchesList(t, s)
	assert.Check(t, strings.Contains(s.log(t), "io.cri.containerd.pinned"), "no warning about the misspelled label key")

	// The sandbox image given as a familiar name and by digest, on shims of their own.
	for _, tc := range []struct{ flag, id string }{
		{flag: "docker.io/rancher/mirrored-pause:3.6", id: imageID(t, "rancher/mirrored-pause:3.6")},
		{flag: sandboxDigestRef, id: sandboxDigestID},
	} {
		t.Run("sandbox "+tc.flag, func(t *testing.T) {
			s := startShim(t, "--pod-infra-container-image", tc.flag)
			got := s.crictlImages(t)
			for id := range want {
				// Without the operator flags, only the sandbox image and the config label pin.
				wantPinned := id == tc.id || id == configLabelID
				assert.Check(t, got[id].Pinned == wantPinned, "image %v: pinned=%v, want %v", got[id].RepoTags, got[id].Pinned, wantPinned)
			}
			assertStatusMatchesList(t, s)
		})
	}
}

// assertStatusMatchesList checks that ImageStatus (gRPC and crictl inspecti) reports
// the same pinned value as ListImages for every image.
func assertStatusMatchesList(t *testing.T, s *shim) {
	t.Helper()
	ctx := context.Background()
	list, err := s.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	assert.NilError(t, err)
	for _, img := range list.Images {
		st, err := s.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: img.Id}, Verbose: true})
		assert.NilError(t, err)
		assert.Assert(t, st.Image != nil, "ImageStatus(%s) is empty", img.Id)
		assert.Check(t, st.Image.Pinned == img.Pinned, "image %v: ImageStatus.pinned=%v, ListImages.pinned=%v", img.RepoTags, st.Image.Pinned, img.Pinned)
	}
	if len(list.Images) == 0 {
		return
	}
	img := list.Images[0]
	var inspect struct {
		Status struct {
			Pinned bool `json:"pinned"`
		} `json:"status"`
		Info map[string]json.RawMessage `json:"info"`
	}
	raw := s.crictl(t, "inspecti", "-o", "json", img.Id)
	assert.NilError(t, json.Unmarshal([]byte(raw), &inspect), raw)
	assert.Equal(t, inspect.Status.Pinned, img.Pinned, fmt.Sprintf("crictl inspecti %v", img.RepoTags))
}

// pinsOff are the flags that turn our binary's pin sources off, for a backend that
// stands in for an unmodified cri-dockerd. The sandbox image is always pinned (there
// is no flag against it): the tests' images are never the sandbox image.
var pinsOff = []string{"--pin-from-config-labels=false", "--pin-from-containerd-labels=false"}

// backend is a cri-dockerd behind the proxy: ours with pinning off, or upstream's.
type backend struct {
	name   string
	binary string
	flags  []string
	ours   bool // its own pins are known to be off: direct ListImages must show nothing pinned
}

// proxyBackends are the backends each proxy test runs with: ours always, upstream's
// when UPSTREAM_CRI_DOCKERD_BIN names its binary.
func proxyBackends() []backend {
	bs := []backend{{name: "ours", binary: env.binary, flags: pinsOff, ours: true}}
	if up := os.Getenv("UPSTREAM_CRI_DOCKERD_BIN"); up != "" {
		bs = append(bs, backend{name: "upstream", binary: up})
	}
	return bs
}

func eachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range proxyBackends() {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
	if os.Getenv("UPSTREAM_CRI_DOCKERD_BIN") == "" {
		t.Run("upstream", func(t *testing.T) { t.Skip("UPSTREAM_CRI_DOCKERD_BIN is not set") })
	}
}

// startProxy starts our binary as the pin proxy in front of be, with our pin flags.
func startProxy(t testing.TB, be *shim, flags ...string) *shim {
	t.Helper()
	return startShim(t, append([]string{"--pin-proxy-backend", be.endpoint}, flags...)...)
}

// TestProxyPinSources: every pin source of the proxy shows through it, over a backend
// that pins none of those images; ImageStatus agrees with ListImages.
func TestProxyPinSources(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		pins := filepath.Join(t.TempDir(), "pins")
		assert.NilError(t, os.WriteFile(pins, []byte("e2e/proxy-file\n"), 0o644))
		plain := importImage(t, "e2e/proxy-plain:1")
		pattern := importImage(t, "e2e/proxy-pattern:1")
		file := importImage(t, "e2e/proxy-file:1")
		label := importImage(t, "e2e/proxy-label:1", "io.cri-containerd.pinned=pinned")
		want := map[string]bool{plain: false, pattern: true, file: true, label: true}
		var record string
		if env.store == "containerd" {
			record = importImage(t, "e2e/proxy-record:1")
			ctr(t, "images", "label", "docker.io/e2e/proxy-record:1", pinLabel+"=pinned")
			want[record] = true
		}

		be := startShimBin(t, b.binary, b.flags...)
		px := startProxy(t, be, "--pinned-images", "e2e/proxy-pattern:1", "--pinned-images-file", pins)
		if b.ours {
			direct := be.crictlImages(t)
			for id := range want {
				assert.Check(t, !direct[id].Pinned, "the backend itself pins %s", id)
			}
		}
		through := px.crictlImages(t)
		for id, pinned := range want {
			assert.Check(t, through[id].Pinned == pinned, "through the proxy %v: pinned=%v, want %v", through[id].RepoTags, through[id].Pinned, pinned)
			st, err := px.img.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: spec(id)})
			assert.NilError(t, err)
			assert.Check(t, st.GetImage().GetPinned() == pinned, "ImageStatus through the proxy %s: pinned=%v", id, st.GetImage().GetPinned())
		}
		if record != "" {
			ctr(t, "images", "label", "docker.io/e2e/proxy-record:1", pinLabel+"=")
			waitListPinned(t, px, record, false)
		}
		// The proxy's footprint after a burst of lists (reported, not asserted).
		for range 100 {
			_, err := px.img.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
			assert.NilError(t, err)
		}
		t.Logf("after 101 ListImages: proxy %s, backend %s", vmRSS(px), vmRSS(be))
		// Every other RPC reaches the backend.
		v, err := px.rt.Version(context.Background(), &runtimeapi.VersionRequest{})
		assert.NilError(t, err)
		assert.Check(t, v.RuntimeName == "docker", "Version through the proxy: %v", v)
	})
}

// TestProxySurvivesBackendRestart: the backend stops (SIGTERM): ListImages through the
// proxy is Unavailable; it starts again: the proxy works without a restart of its own.
func TestProxySurvivesBackendRestart(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		pattern := importImage(t, "e2e/proxy-restart:1")
		be := startShimBin(t, b.binary, b.flags...)
		px := startProxy(t, be, "--pinned-images", "e2e/proxy-restart")
		waitListPinned(t, px, pattern, true)

		be.stop(t)
		ctx := context.Background()
		_, err := px.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
		assert.Check(t, status.Code(err) == codes.Unavailable, "ListImages with the backend down: %v", err)
		_, err = px.rt.Version(ctx, &runtimeapi.VersionRequest{})
		assert.Check(t, status.Code(err) == codes.Unavailable, "Version with the backend down: %v", err)

		be.restart(t)
		waitAllPinned(t, px, map[string]string{"pattern, after the backend's restart": pattern})
		assert.Check(t, px.cmd.ProcessState == nil, "the proxy must not have exited")
	})
}

// TestProxyStreamingWithCrictl: a pod made through the proxy; exec and port-forward
// through it with crictl: the backend's streaming URLs pass through untouched.
func TestProxyStreamingWithCrictl(t *testing.T) {
	pauseImage(t)
	eachBackend(t, func(t *testing.T, b backend) {
		pn := newPodNet(t)
		flags := append(pn.flags(filepath.Join(t.TempDir(), "root")), "--streaming-bind-addr", "127.0.0.1:0")
		be := startShimBin(t, b.binary, append(flags, b.flags...)...)
		px := startProxy(t, be)
		pod := podConfig("proxy-stream")
		podID := runPod(t, px, pod)
		t.Cleanup(func() { stopAndRemovePod(t, px, podID) })
		id := startContainer(t, px, podID, pod, httpdContainer("httpd", "8080", ""))
		waitHTTP(t, "http://"+net.JoinHostPort(podStatus(t, px, podID).GetNetwork().GetIp(), "8080")+"/")

		out := px.crictl(t, "exec", id, "/citool", "pgrep", "^citool$")
		assert.Assert(t, strings.TrimSpace(out) != "", "pgrep printed no pid")
		b2, err := exec.Command(env.crictl, "--runtime-endpoint", px.endpoint, "exec", id, "/citool", "pgrep", "no-such-process").CombinedOutput()
		var exitErr *exec.ExitError
		assert.Assert(t, errors.As(err, &exitErr), "a failing command must fail crictl exec: %v %s", err, b2)

		lis, err := net.Listen("tcp", "127.0.0.1:0")
		assert.NilError(t, err)
		local := lis.Addr().(*net.TCPAddr).Port
		assert.NilError(t, lis.Close())
		ctx, cancel := context.WithCancel(context.Background())
		pf := exec.CommandContext(ctx, env.crictl, "--runtime-endpoint", px.endpoint, "port-forward", podID, fmt.Sprintf("%d:8080", local))
		assert.NilError(t, pf.Start())
		t.Cleanup(func() { cancel(); _ = pf.Wait() })
		waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/", local))

		// The URL the proxy hands out is the backend's own, on the backend's streaming
		// server (upstream's has no scheme: "//127.0.0.1:PORT/cri/exec/TOKEN").
		viaProxy, err := px.rt.Exec(context.Background(), &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"/citool"}, Stdout: true})
		assert.NilError(t, err)
		assert.Check(t, strings.Contains(viaProxy.Url, "//127.0.0.1:") && strings.Contains(viaProxy.Url, "/exec/"), "exec URL %q", viaProxy.Url)
	})
}

// TestProxyFailSafe: the proxy's containerd pin source has never answered: ListImages
// through the proxy is Unavailable (the backend would list the image unpinned), while
// ImageStatus and the other RPCs go on; once containerd answers, the list shows the pin,
// without a restart of the proxy.
func TestProxyFailSafe(t *testing.T) {
	requireContainerdStore(t)
	eachBackend(t, func(t *testing.T, b backend) {
		id := importImage(t, "e2e/proxy-failsafe:1")
		ctr(t, "images", "label", "docker.io/e2e/proxy-failsafe:1", pinLabel+"=pinned")
		ctrd := &sockProxy{path: filepath.Join(t.TempDir(), "ctrd.sock"), target: containerdSocket()}
		be := startShimBin(t, b.binary, b.flags...)
		px := startProxy(t, be, "--containerd-address", ctrd.path, "--containerd-timeout", "500ms")
		ctx := context.Background()

		_, err := px.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
		assert.Check(t, status.Code(err) == codes.Unavailable, "ListImages through the proxy, containerd never answered: %v", err)
		assert.Check(t, strings.Contains(status.Convert(err).Message(), "containerd-label"), err)
		st, err := px.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec(id)})
		assert.NilError(t, err, "ImageStatus must go on")
		assert.Check(t, st.GetImage().GetId() == id)
		_, err = px.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		assert.NilError(t, err)
		assert.Check(t, pinSourceState(t, px, "containerd-label")["state"] == "never read", "crictl info through the proxy shows its pin sources")

		ctrd.start(t)
		defer ctrd.stop()
		waitAllPinned(t, px, map[string]string{"containerd label": id})
	})
}

// vmRSS is a shim's resident set size as /proc reports it ("23456 kB").
func vmRSS(s *shim) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return err.Error()
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
