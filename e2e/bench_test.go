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
	"strconv"
	"testing"

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

// BenchmarkListImagesE2E times ListImages on the real engine with benchImages() images,
// through our gRPC client and through crictl, with pinning configured and with every
// optional source off (the sandbox image is always pinned).
func BenchmarkListImagesE2E(b *testing.B) {
	n := benchImages()
	loadBenchImages(b, n)
	configs := map[string][]string{
		"pinning=on":  benchPinFlags,
		"pinning=off": {"--pin-from-config-labels=false"},
	}
	for _, name := range []string{"pinning=off", "pinning=on"} {
		s := startShim(b, configs[name]...)
		b.Run(fmt.Sprintf("grpc/%s/images=%d", name, n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := s.img.ListImages(context.Background(), &runtimeapi.ListImagesRequest{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("crictl/%s/images=%d", name, n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cmd := exec.Command(env.crictl, "--runtime-endpoint", s.endpoint, "--image-endpoint", s.endpoint, "images")
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("crictl images: %v: %s", err, out)
				}
			}
		})
	}
}
