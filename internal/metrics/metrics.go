package metrics

import (
	"context"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Namespace prefixes the metrics of our own (cri_dockerd_…).
const Namespace = "cri_dockerd"

// Build describes the binary, for cri_dockerd_build_info.
type Build struct {
	// Version is what --version prints (0.4.3+dockpin.N.gC).
	Version string
	// Commit is the short commit.
	Commit string
	// UpstreamRelease is the upstream release it is a drop-in for.
	UpstreamRelease string
}

// Metrics is the registry and the gRPC server metrics registered in it.
type Metrics struct {
	reg  *prometheus.Registry
	grpc *grpcprom.ServerMetrics
}

// New returns a registry with the Go runtime, process, build-information and gRPC server
// collectors registered.
func New(b Build) *Metrics {
	reg := prometheus.NewRegistry()
	srv := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets([]float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}),
	))
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help:        "Always 1; the labels name this build and the upstream cri-dockerd release it is a drop-in for.",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": b.Commit, "upstream_release": b.UpstreamRelease},
	})
	info.Set(1)
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		srv,
		info,
	)
	return &Metrics{reg: reg, grpc: srv}
}

// Registry is where every collector of the daemon registers.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Instrument returns the interceptors that count and time every RPC, to go first in the
// server's chains so that they see the code the client gets. Call Initialize once the
// services are registered.
func (m *Metrics) Instrument() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary, stream := m.grpc.UnaryServerInterceptor(), m.grpc.StreamServerInterceptor()
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if !criMethods[info.FullMethod] {
				info = &grpc.UnaryServerInfo{Server: info.Server, FullMethod: unknownMethod}
			}
			return unary(ctx, req, info, handler)
		}, func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			if !criMethods[info.FullMethod] {
				info = &grpc.StreamServerInfo{FullMethod: unknownMethod, IsClientStream: info.IsClientStream, IsServerStream: info.IsServerStream}
			}
			return stream(srv, ss, info, handler)
		}
}

// unknownMethod is the name the series of every method that is not the CRI's count
// under: a client may send any name (the pin proxy forwards names it does not know),
// and each name would otherwise make new series, without bound.
const unknownMethod = "/unknown/unknown"

// criMethods are the full names of the CRI's methods (runtime.v1 RuntimeService and
// ImageService), the ones that get series of their own.
var criMethods = func() map[string]bool {
	out := map[string]bool{}
	for _, d := range []grpc.ServiceDesc{runtimeapi.RuntimeService_ServiceDesc, runtimeapi.ImageService_ServiceDesc} {
		for _, m := range d.Methods {
			out["/"+d.ServiceName+"/"+m.MethodName] = true
		}
		for _, st := range d.Streams {
			out["/"+d.ServiceName+"/"+st.StreamName] = true
		}
	}
	return out
}()

// Initialize creates every method's series at zero, so that a method never called shows too.
func (m *Metrics) Initialize(srv *grpc.Server) { m.grpc.InitializeMetrics(srv) }
