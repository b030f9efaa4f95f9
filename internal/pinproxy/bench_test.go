package pinproxy

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dockpin/cri-dockerd/pinning/pin"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// benchImages is how many images the benchmark's backend lists.
const benchImages = 1000

// benchHarness is the proxy in front of a backend of n images, each with config labels in
// the engine, every 20th with the pin label (as e2e/bench_test.go's archive).
func benchHarness(b *testing.B, n int) *harness {
	b.Helper()
	imgs := make([]*runtimeapi.Image, n)
	labels := make(map[string]map[string]string, n)
	for i := range imgs {
		id := fmt.Sprintf("sha256:%064x", i+1)
		imgs[i] = &runtimeapi.Image{Id: id, RepoTags: []string{fmt.Sprintf("bench/img-%04d:v1", i)},
			RepoDigests: []string{fmt.Sprintf("bench/img-%04d@sha256:%064x", i, i+1)}, Size: 1 << 20}
		labels[id] = map[string]string{"bench.index": fmt.Sprint(i)}
		if i%20 == 0 {
			labels[id][pin.PinnedLabel] = pin.PinnedValue
		}
	}
	return newHarnessOn(b, &backendNet{images: imgs}, &fakeEngine{labels: labels})
}

// BenchmarkLatency measures each RPC straight to the backend and through the proxy,
// both over bufconn, and reports the p50 and p99 of one call (µs); the proxy's added
// latency is the difference, its added allocation per call the difference of B/op and
// allocs/op (client, proxy and backend share the process). ListImages lists 1,000
// images; through the proxy it includes the pin evaluation (sandbox image, one pattern,
// config labels) with the fake engine's labels.
func BenchmarkLatency(b *testing.B) {
	h := benchHarness(b, benchImages)
	ctx := context.Background()
	rpcs := []struct {
		name string
		call func(*grpc.ClientConn) error
	}{
		{"Version", func(c *grpc.ClientConn) error {
			_, err := runtimeapi.NewRuntimeServiceClient(c).Version(ctx, &runtimeapi.VersionRequest{})
			return err
		}},
		{"PodSandboxStatus", func(c *grpc.ClientConn) error {
			_, err := runtimeapi.NewRuntimeServiceClient(c).PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "pod-1"})
			return err
		}},
		{"ListContainers", func(c *grpc.ClientConn) error {
			_, err := runtimeapi.NewRuntimeServiceClient(c).ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			return err
		}},
		{fmt.Sprintf("ListImages/images=%d", benchImages), func(c *grpc.ClientConn) error {
			resp, err := runtimeapi.NewImageServiceClient(c).ListImages(ctx, &runtimeapi.ListImagesRequest{})
			if err == nil && len(resp.Images) != benchImages {
				err = fmt.Errorf("listed %d images, want %d", len(resp.Images), benchImages)
			}
			return err
		}},
	}
	for _, rpc := range rpcs {
		for _, via := range []struct {
			name string
			conn *grpc.ClientConn
		}{{"direct", h.direct}, {"proxy", h.conn}} {
			b.Run(fmt.Sprintf("%s/%s", rpc.name, via.name), func(b *testing.B) {
				lat := make([]time.Duration, 0, b.N)
				b.ReportAllocs()
				for b.Loop() {
					start := time.Now()
					if err := rpc.call(via.conn); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
			})
		}
	}
}
