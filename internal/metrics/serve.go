package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
)

// Server serves /metrics (and /debug/pprof/) over HTTP.
type Server struct {
	srv *http.Server
	lis net.Listener
}

// Listen serves m's registry at /metrics on address (host:port; port 0 picks a free one) and,
// with withPprof, Go's profiles at /debug/pprof/, until Close. Neither is authenticated:
// bind loopback unless the network is trusted.
func Listen(address string, m *Metrics, withPprof bool, log logrus.FieldLogger) (*Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	lis, err := net.Listen("tcp", address)
	if err != nil {
		return nil, err
	}
	if withPprof && !loopback(lis.Addr()) {
		log.WithField("address", lis.Addr().String()).Warn("--enable-pprof on an address that is not loopback: " +
			"whoever reaches it reads the daemon's command line, stacks and memory profiles, and can keep it busy profiling; bind --metrics-address to 127.0.0.1")
	}
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, lis: lis}
	go func() {
		if err := s.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.WithError(err).Error("metrics server stopped")
		}
	}()
	return s, nil
}

// Addr is the address it listens on.
func (s *Server) Addr() net.Addr { return s.lis.Addr() }

// Close stops it, letting a scrape in progress finish for a few seconds.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// loopback tells whether a listener's address is reachable from this host only.
func loopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}
