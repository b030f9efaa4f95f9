//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// benchImages is how many images the e2e benchmarks load (BENCH_IMAGES overrides).
func benchImages() int { return envInt("BENCH_IMAGES", 1000) }

// envInt reads a positive integer from the environment, or def.
func envInt(key string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(key)); err == nil && n > 0 {
		return n
	}
	return def
}

// imageArchive builds a `docker save` archive of n distinct images that share one
// layer: bench/img-NNNN:v1, every 20th with the pin label in its config.
func imageArchive(t testing.TB, n int) []byte {
	t.Helper()
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	body := []byte("bench\n")
	assert.NilError(t, lw.WriteHeader(&tar.Header{Name: "bench", Mode: 0o644, Size: int64(len(body))}))
	_, _ = lw.Write(body)
	assert.NilError(t, lw.Close())
	layerSum := sha256.Sum256(layer.Bytes())
	layerHex := hex.EncodeToString(layerSum[:])

	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	add := func(name string, data []byte) {
		assert.NilError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data))}))
		_, err := tw.Write(data)
		assert.NilError(t, err)
	}
	add(layerHex+"/layer.tar", layer.Bytes())
	type entry struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	manifest := make([]entry, 0, n)
	for i := 0; i < n; i++ {
		labels := map[string]string{"bench.index": strconv.Itoa(i)}
		if i%20 == 0 {
			labels["io.cri-containerd.pinned"] = "pinned"
		}
		cfg, err := json.Marshal(map[string]any{
			"architecture": "amd64", "os": "linux", "created": "2026-01-01T00:00:00Z",
			"config":  map[string]any{"Labels": labels},
			"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerHex}},
			"history": []map[string]any{{"created": "2026-01-01T00:00:00Z", "created_by": "bench"}},
		})
		assert.NilError(t, err)
		sum := sha256.Sum256(cfg)
		name := hex.EncodeToString(sum[:]) + ".json"
		add(name, cfg)
		manifest = append(manifest, entry{Config: name, RepoTags: []string{fmt.Sprintf("bench/img-%04d:v1", i)}, Layers: []string{layerHex + "/layer.tar"}})
	}
	raw, err := json.Marshal(manifest)
	assert.NilError(t, err)
	add("manifest.json", raw)
	assert.NilError(t, tw.Close())
	return out.Bytes()
}

// loadBenchImages loads the benchmark images into the engine once.
func loadBenchImages(b *testing.B, n int) {
	b.Helper()
	if _, err := dockerErr(nil, "image", "inspect", fmt.Sprintf("bench/img-%04d:v1", n-1)); err == nil {
		return
	}
	_, err := dockerErr(imageArchive(b, n), "load", "-q")
	assert.NilError(b, err)
}

// benchPinFlags is a realistic operator configuration: patterns of every form and a label.
var benchPinFlags = []string{
	"--pinned-images", "registry.example.com/team/*,*keyword*,busybox:1.36,quay.io/org/app,bench/img-0007:v1,bench/img-01*",
	"--pinned-image-labels", "tier=system",
}

// benchConfigs are the shim configurations the e2e benchmarks compare.
var benchConfigs = []struct {
	name  string
	flags []string
}{
	{"cache=off/pinning=off", []string{"--image-cache=false", "--pin-from-config-labels=false", "--pin-from-containerd-labels=false"}},
	{"cache=off/pinning=on/containerd=off", append([]string{"--image-cache=false", "--pin-from-containerd-labels=false"}, benchPinFlags...)},
	{"cache=off/pinning=on", append([]string{"--image-cache=false"}, benchPinFlags...)},
	{"cache=on/pinning=off", []string{"--pin-from-config-labels=false", "--pin-from-containerd-labels=false"}},
	{"cache=on/pinning=on/containerd=off", append([]string{"--pin-from-containerd-labels=false"}, benchPinFlags...)},
	{"cache=on/pinning=on", benchPinFlags},
}

// timed runs f b.N times and reports the median, p90 and p99 of one call in ms.
func timed(b *testing.B, f func() error) {
	b.Helper()
	durs := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(start))
	}
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1000, "ms-median")
	b.ReportMetric(float64(durs[len(durs)*9/10].Microseconds())/1000, "ms-p90")
	b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds())/1000, "ms-p99")
}

// BenchmarkListImagesE2E times ListImages on the real engine with benchImages() images,
// through our gRPC client and through crictl, in every benchConfigs configuration.
func BenchmarkListImagesE2E(b *testing.B) {
	n := benchImages()
	loadBenchImages(b, n)
	for _, cfg := range benchConfigs {
		s := startShim(b, cfg.flags...)
		waitCacheLive(b, s)
		b.Run(fmt.Sprintf("grpc/%s/images=%d", cfg.name, n), func(b *testing.B) {
			timed(b, func() error {
				_, err := s.img.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
				return err
			})
		})
		b.Run(fmt.Sprintf("crictl/%s/images=%d", cfg.name, n), func(b *testing.B) {
			timed(b, func() error {
				out, err := exec.Command(env.crictl, "--timeout", "120s", "--runtime-endpoint", s.endpoint, "--image-endpoint", s.endpoint, "images").CombinedOutput()
				if err != nil {
					return fmt.Errorf("crictl images: %w: %s", err, out)
				}
				return nil
			})
		})
	}
}

// waitCacheLive waits until the shim's image cache (when on) serves from its index.
func waitCacheLive(b *testing.B, s *shim) {
	b.Helper()
	for i := 0; i < 600; i++ {
		st, err := s.rt.Status(context.Background(), &runtimeapi.StatusRequest{Verbose: true})
		assert.NilError(b, err)
		if !strings.Contains(st.Info["imageCache"], `"state":"starting"`) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatal("image cache never filled")
}

// BenchmarkCacheRSSE2E reports the resident memory of our binary with BENCH_RSS_IMAGES
// (default 5,000) images, with the image cache on and off, after one ListImages.
func BenchmarkCacheRSSE2E(b *testing.B) {
	n := envInt("BENCH_RSS_IMAGES", 5000)
	loadBenchImages(b, n)
	for _, cfg := range []struct{ name, flag string }{{"cache=on", "--image-cache=true"}, {"cache=off", "--image-cache=false"}} {
		b.Run(fmt.Sprintf("%s/images=%d", cfg.name, n), func(b *testing.B) {
			s := startShim(b, append([]string{cfg.flag}, benchPinFlags...)...)
			waitCacheLive(b, s)
			for i := 0; i < b.N; i++ {
				resp, err := s.img.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
				assert.NilError(b, err)
				assert.Assert(b, len(resp.Images) >= n)
			}
			b.ReportMetric(float64(rssKiB(b, s.cmd.Process.Pid))/1024, "MiB-rss")
		})
	}
}

// rssKiB reads VmRSS of pid.
func rssKiB(b *testing.B, pid int) int {
	b.Helper()
	return procStatusKiB(b, pid, "VmRSS:")
}

// BenchmarkImageFsInfoE2E times ImageFsInfo (what kubelet's eviction manager and its
// image GC ask every few seconds) on the real engine with BENCH_FSINFO_IMAGES (default
// 10,000) images present, image cache on: the disk usage it reports is the cache's,
// refreshed in the background, so the answer must not cost a walk of the images.
func BenchmarkImageFsInfoE2E(b *testing.B) {
	n := envInt("BENCH_FSINFO_IMAGES", 10000)
	loadBenchImages(b, n)
	s := startShim(b)
	waitCacheLive(b, s)
	b.Run(fmt.Sprintf("images=%d", n), func(b *testing.B) {
		timed(b, func() error {
			_, err := s.img.ImageFsInfo(context.Background(), &runtimeapi.ImageFsInfoRequest{})
			return err
		})
	})
}
