// Package metrics is the daemon's Prometheus metrics: one registry, made by New and passed
// around (never the global default one), with per-RPC counts and latency histograms by method
// and code from go-grpc-middleware's Prometheus provider, pinning's state, build information,
// and the Go runtime and process collectors; Listen serves it, and /debug/pprof/ when asked, on
// --metrics-address.
package metrics

import (
	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
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
	return m.grpc.UnaryServerInterceptor(), m.grpc.StreamServerInterceptor()
}

// Initialize creates every method's series at zero, so that a method never called shows too.
func (m *Metrics) Initialize(srv *grpc.Server) { m.grpc.InitializeMetrics(srv) }
