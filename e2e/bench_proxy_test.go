//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"

	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkProxyE2E times RPCs on the real engine with benchImages() images, straight to
// a backend and through our binary as the pin proxy in front of it (benchPinFlags), for
// each backend (ours with its pins off; upstream's with UPSTREAM_CRI_DOCKERD_BIN): the
// proxy's added latency is the difference. Then the proxy's resident memory.
func BenchmarkProxyE2E(b *testing.B) {
	n := benchImages()
	loadBenchImages(b, n)
	pauseImage(b)
	ctx := context.Background()
	for _, be := range proxyBackends() {
		backend := startShimBin(b, be.binary, append([]string{"--pod-infra-container-image", pauseRef}, be.flags...)...)
		px := startProxy(b, backend, benchPinFlags...)
		pod := podConfig("bench-proxy-" + be.name) // a name per backend: the previous pod stays until the end
		pod.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}
		run, err := backend.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: pod})
		assert.NilError(b, err)
		podID := run.GetPodSandboxId()
		b.Cleanup(func() {
			_, _ = backend.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podID})
			_, _ = backend.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podID})
		})
		rpcs := []struct {
			name string
			call func(s *shim) error
		}{
			{"Version", func(s *shim) error {
				_, err := s.rt.Version(ctx, &runtimeapi.VersionRequest{})
				return err
			}},
			{"PodSandboxStatus", func(s *shim) error {
				_, err := s.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podID})
				return err
			}},
			{"ListContainers", func(s *shim) error {
				_, err := s.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
				return err
			}},
			{fmt.Sprintf("ListImages/images=%d", n), func(s *shim) error {
				resp, err := s.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
				if err == nil && len(resp.Images) < n {
					err = fmt.Errorf("listed %d images, want at least %d", len(resp.Images), n)
				}
				return err
			}},
		}
		for _, rpc := range rpcs {
			for _, via := range []struct {
				name string
				s    *shim
			}{{"direct", backend}, {"proxy", px}} {
				b.Run(fmt.Sprintf("%s/%s/%s", be.name, rpc.name, via.name), func(b *testing.B) {
					timed(b, func() error { return rpc.call(via.s) })
				})
			}
		}
		b.Run(fmt.Sprintf("%s/rss/images=%d", be.name, n), func(b *testing.B) {
			b.ReportMetric(float64(rssKiB(b, px.cmd.Process.Pid))/1024, "MiB-rss-proxy")
			b.ReportMetric(float64(rssKiB(b, backend.cmd.Process.Pid))/1024, "MiB-rss-backend")
		})
	}
}
