package proxy

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkLatency measures each RPC straight to the backend and through the proxy,
// both over bufconn, and reports the median (p50-µs); the proxy's added latency is the
// difference. ListImages through the proxy includes the pin evaluation (sandbox image,
// one pattern, config labels) over the backend's images with the fake engine's labels.
func BenchmarkLatency(b *testing.B) {
	h := newHarness(b)
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
		{"ListImages", func(c *grpc.ClientConn) error {
			_, err := runtimeapi.NewImageServiceClient(c).ListImages(ctx, &runtimeapi.ListImagesRequest{})
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
			})
		}
	}
}
