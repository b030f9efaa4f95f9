//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkPreloadRestartE2E measures a restart of cri-dockerd with BENCH_PRELOAD_ARCHIVES
// (default 20) archives of BENCH_PRELOAD_MB (default 20) MB each, loaded at an earlier
// start, the images still in the engine: seconds until the socket serves, and until
// ListImages shows every image pinned. It runs for our binary and, when
// PRELOAD_BASELINE_BIN names one, for an earlier binary (which loads every archive
// again, before serving). Run: hack/bench-preload.sh.
func BenchmarkPreloadRestartE2E(b *testing.B) {
	n, mb := envInt("BENCH_PRELOAD_ARCHIVES", 20), envInt("BENCH_PRELOAD_MB", 20)
	dir := b.TempDir()
	ids := make([]string, n)
	for i := range n {
		tag := fmt.Sprintf("bench/preload-%02d:1", i)
		_, err := dockerErr(bigRootfsTar(b, mb<<20), "import", "-", tag)
		assert.NilError(b, err)
		ids[i] = imageID(b, tag)
		removeAtEnd(b, ids[i])
		docker(b, "save", "-o", filepath.Join(dir, fmt.Sprintf("img-%02d.tar", i)), tag)
	}
	binaries := [][2]string{{"ours", env.binary}}
	if base := os.Getenv("PRELOAD_BASELINE_BIN"); base != "" {
		binaries = append([][2]string{{"baseline", base}}, binaries...)
	}
	for _, bin := range binaries {
		b.Run(bin[0], func(b *testing.B) {
			root := filepath.Join(b.TempDir(), "root")
			s := startBinary(b, bin[1], "", "--preload-images-dir", dir, "--cri-dockerd-root-directory", root, "--log-level", "info")
			waitAllPinnedIDs(b, s, ids)
			var serve, pinned time.Duration
			b.ResetTimer()
			for range b.N {
				s.stop(b)
				start := time.Now()
				s.cmd = exec.Command(s.binary, s.args...)
				assert.NilError(b, s.cmd.Start())
				// A new connection for every probe: the test's own would wait out its
				// reconnect backoff after the stop.
				for !freshServes(s.endpoint) {
					time.Sleep(10 * time.Millisecond)
				}
				serve += time.Since(start)
				waitAllPinnedIDs(b, s, ids)
				pinned += time.Since(start)
			}
			b.StopTimer()
			b.ReportMetric(serve.Seconds()/float64(b.N), "s-to-serve")
			b.ReportMetric(pinned.Seconds()/float64(b.N), "s-to-all-pinned")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// freshServes tells whether the CRI socket answers Version on a new connection.
func freshServes(endpoint string) bool {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	return err == nil
}

// waitAllPinnedIDs waits, polling every 20 ms on a new connection, until ListImages
// shows every one of ids pinned.
func waitAllPinnedIDs(b *testing.B, s *shim, ids []string) {
	b.Helper()
	deadline := time.Now().Add(30 * time.Minute)
	for {
		got, err := listPinnedFresh(s.endpoint)
		missing := 0
		for _, id := range ids {
			if !got[id] {
				missing++
			}
		}
		if err == nil && missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d images not pinned after 30 minutes (%v)", missing, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func listPinnedFresh(endpoint string) (map[string]bool, error) {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := runtimeapi.NewImageServiceClient(conn).ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(resp.Images))
	for _, img := range resp.Images {
		out[img.Id] = img.Pinned
	}
	return out, nil
}
