// Package metrics is the daemon's Prometheus metrics: one registry, made by New and passed
// around (never the global default one), with per-RPC counts and latency histograms by method
// and code from go-grpc-middleware's Prometheus provider, pinning's state, build information,
// and the Go runtime and process collectors; Listen serves it, and /debug/pprof/ when asked, on
// --metrics-address.
//
// The gRPC server metrics come from interceptors (Instrument) that internal/app puts first in
// the server's chains, so that the code counted is the one the client gets. Only the CRI's
// methods get series of their own: any other method name (a client may send any, and the pin
// proxy forwards names it does not know) is counted under service and method "unknown", so
// that made-up names cannot add series without bound.
//
// The state of other parts is read at each scrape (sources.go): pinning's Health, the image
// cache's and the log copier's Stats, and the streaming server's OpenSessions, each through a
// small interface of its own. Listen warns when --enable-pprof serves the profiles on an
// address that is not loopback: neither /metrics nor /debug/pprof/ is authenticated.
package metrics
