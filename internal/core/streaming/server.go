package streaming

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/logctx"
)

// Engine is what the streaming runtime needs from the engine (docker.Client
// implements it).
type Engine interface {
	// Exec runs a command in a running container and returns its exit code.
	Exec(ctx context.Context, id string, opts docker.ExecOptions) (int, error)
	// Attach connects to a running container's main process.
	Attach(ctx context.Context, id string, opts docker.AttachOptions) error
	// InspectContainer gives a sandbox's init process (for its network namespace).
	InspectContainer(ctx context.Context, id string) (docker.ContainerDetails, error)
}

// readHeaderTimeout bounds how long a client may take to send its request headers.
const readHeaderTimeout = 30 * time.Second

// Server is the streaming server: it hands out URLs (GetExec, GetAttach,
// GetPortForward) and serves them (Serve) until Close.
type Server struct {
	lib  streaming.Server
	ln   net.Listener
	http *http.Server
	log  logrus.FieldLogger
	addr string

	// ctx is the parent of every stream's context; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	// conns are the accepted connections not yet closed (upgraded ones included,
	// which http.Server.Close does not close).
	conns map[*trackedConn]struct{}
	// active counts running handlers and runtime calls; Close waits for them.
	active sync.WaitGroup
	// open counts the streams running, by kind (SessionKinds); the map is not changed after New.
	open map[string]*atomic.Int64
}

// The kinds of streaming session.
const (
	SessionExec        = "exec"
	SessionAttach      = "attach"
	SessionPortForward = "portforward"
)

// SessionKinds lists the kinds of streaming session.
func SessionKinds() []string { return []string{SessionExec, SessionAttach, SessionPortForward} }

// OpenSessions returns the number of streams running now, by kind.
func (s *Server) OpenSessions() map[string]int64 {
	out := make(map[string]int64, len(s.open))
	for k, n := range s.open {
		out[k] = n.Load()
	}
	return out
}

// New validates cfg, listens on its address (so that the URLs carry the actual
// port) and returns a server that serves once Serve is called. A nil log discards.
func New(cfg Config, engine Engine, log logrus.FieldLogger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log = logctx.OrDiscard(log)
	addr, _ := cfg.listenAddr()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("streaming server: listen on %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		log:    log,
		addr:   ln.Addr().String(),
		ctx:    ctx,
		cancel: cancel,
		conns:  map[*trackedConn]struct{}{},
		open:   map[string]*atomic.Int64{},
	}
	for _, k := range SessionKinds() {
		s.open[k] = new(atomic.Int64)
	}
	s.ln = &trackingListener{Listener: ln, s: s}

	lib, err := streaming.NewServer(streaming.Config{
		Addr:                            s.addr,
		BaseURL:                         &url.URL{Scheme: "http", Host: advertised(ln.Addr()), Path: "/"},
		StreamIdleTimeout:               cfg.idleTimeout(),
		StreamCreationTimeout:           cfg.creationTimeout(),
		SupportedRemoteCommandProtocols: remotecommand.SupportedStreamingProtocols,
		SupportedPortForwardProtocols:   portforward.SupportedProtocols,
	}, &runtime{engine: engine, log: log, s: s})
	if err != nil {
		cancel()
		_ = ln.Close()
		return nil, fmt.Errorf("streaming server: %w", err)
	}
	s.lib = lib
	s.http = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: readHeaderTimeout,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext:       connContext,
		ErrorLog:          stdlog.New(logWriter{s.log}, "", 0),
	}
	return s, nil
}

// advertised is the host:port put into URLs: the listening address, with loopback
// standing in for an unspecified one (kubelet connects from the same node).
func advertised(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return a.String()
	}
	host := "127.0.0.1"
	if tcp.IP.To4() == nil {
		host = "::1"
	}
	return net.JoinHostPort(host, fmt.Sprint(tcp.Port))
}

// Addr is the address the server listens on (host:port).
func (s *Server) Addr() string { return s.addr }

// GetExec returns the URL of an exec stream for req.
func (s *Server) GetExec(req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return s.lib.GetExec(req)
}

// GetAttach returns the URL of an attach stream for req.
func (s *Server) GetAttach(req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return s.lib.GetAttach(req)
}

// GetPortForward returns the URL of a port-forward stream for req.
func (s *Server) GetPortForward(req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return s.lib.GetPortForward(req)
}

// Serve serves streams until Close; it returns nil after Close.
func (s *Server) Serve() error {
	s.log.WithField("addr", s.addr).Debug("streaming server serving")
	err := s.http.Serve(s.ln)
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("streaming server: %w", err)
}

// Close stops serving: it closes the listener and every connection (upgraded
// streams included), cancels the running execs, attaches and port-forwards, and
// waits for them to return. Calling it again is a no-op.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()

	s.cancel()
	err := s.http.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil // Serve was never called: the listener is closed below
	}
	_ = s.ln.Close()
	s.mu.Lock()
	conns := s.conns
	s.conns = map[*trackedConn]struct{}{}
	s.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
	s.active.Wait()
	return err
}

// begin registers a running handler or runtime call; false once closed.
func (s *Server) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.active.Add(1)
	return true
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.begin() {
		http.Error(w, "streaming server is shutting down", http.StatusServiceUnavailable)
		return
	}
	defer s.active.Done()
	s.lib.ServeHTTP(w, r)
}

// trackingListener records the connections it accepts, so that Close can close
// the upgraded ones too.
type trackingListener struct {
	net.Listener
	s *Server
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, s: l.s}
	tc.alive, tc.gone = context.WithCancel(l.s.ctx)
	l.s.mu.Lock()
	closed := l.s.closed
	if !closed {
		l.s.conns[tc] = struct{}{}
	}
	l.s.mu.Unlock()
	if closed {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	return tc, nil
}

// trackedConn forgets itself when closed, and ends its requests' context when the
// client goes away: once a stream is upgraded, net/http no longer watches the
// connection, so an exec whose process closed its output and runs on would
// otherwise hold its engine connection until the process exits.
type trackedConn struct {
	net.Conn
	s    *Server
	once sync.Once
	// alive ends when the client goes away or the connection is closed; gone
	// ends it.
	alive context.Context
	gone  context.CancelFunc
}

// connContext gives each accepted connection's requests, upgraded streams
// included, a context that also ends when the client goes away (see
// trackedConn.Read) or the connection is closed.
func connContext(ctx context.Context, c net.Conn) context.Context {
	tc, ok := c.(*trackedConn)
	if !ok {
		return ctx
	}
	ctx, cancel := context.WithCancel(ctx)
	context.AfterFunc(tc.alive, cancel)
	return ctx
}

// Read reports the client gone on any error but an expired deadline, which net/http
// sets to stop its own background reads.
func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		c.gone()
	}
	return n, err
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
		c.gone()
	})
	return c.Conn.Close()
}

// logWriter sends the HTTP server's own error log (bad requests, TLS probes) to
// the logger at debug level.
type logWriter struct{ log logrus.FieldLogger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Debug(strings.TrimSpace(string(p)))
	return len(p), nil
}
