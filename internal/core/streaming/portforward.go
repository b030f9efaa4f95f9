package streaming

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// dialTimeout bounds one connection attempt to the pod's port.
const dialTimeout = 5 * time.Second

// PortForward connects stream to port on the loopback of the pod sandbox's network
// namespace (127.0.0.1 first, then ::1) and copies both ways: the client's end of
// input half-closes the connection to the pod, and the pod's end of output ends the
// forward. The library closes stream when PortForward returns.
func (r *runtime) PortForward(ctx context.Context, podSandboxID string, port int32, stream io.ReadWriteCloser) error {
	ctx, done, err := r.start(ctx, SessionPortForward)
	if err != nil {
		return err
	}
	defer done()
	log := r.log.WithFields(logrus.Fields{"pod_sandbox": podSandboxID, "port": port})

	if port <= 0 || port > 65535 {
		return fmt.Errorf("port %d is not a TCP port: %w", port, cerrdefs.ErrInvalidArgument)
	}
	sb, err := r.engine.InspectContainer(ctx, podSandboxID)
	if err != nil {
		return fmt.Errorf("port-forward to pod sandbox %s: %w", podSandboxID, err)
	}
	if sb.State != docker.StateRunning || sb.Pid <= 0 {
		return fmt.Errorf("port-forward to pod sandbox %s: it is not running (%s): %w", podSandboxID, sb.State, cerrdefs.ErrFailedPrecondition)
	}
	conn, err := dialInNetns(ctx, fmt.Sprintf("/proc/%d/ns/net", sb.Pid), port)
	if err != nil {
		return fmt.Errorf("port-forward to pod sandbox %s port %d: %w", podSandboxID, port, err)
	}
	log.Debug("port-forward started")
	err = pipe(ctx, conn, stream)
	if err != nil {
		log.WithError(err).Debug("port-forward ended with an error")
		return fmt.Errorf("port-forward to pod sandbox %s port %d: %w", podSandboxID, port, err)
	}
	log.Debug("port-forward ended")
	return nil
}

// dialLoopback connects to port on 127.0.0.1, then on ::1, in the calling
// thread's network namespace. The addresses are literal and tried one after the
// other: no resolver, and no parallel dials from other threads (which would run in
// another namespace).
func dialLoopback(ctx context.Context, port int32) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	p := fmt.Sprint(port)
	conn, err4 := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", p))
	if err4 == nil {
		return conn, nil
	}
	conn, err6 := d.DialContext(ctx, "tcp6", net.JoinHostPort("::1", p))
	if err6 == nil {
		return conn, nil
	}
	return nil, fmt.Errorf("%w; %w", err4, err6)
}

// pipe copies between conn and stream until the pod's side (conn) has no more
// output or ctx ends; the end of the client's input only half-closes conn, so that
// the pod still answers (as a direct TCP connection would). It closes conn and
// stream before returning. A copy still blocked reading the stream returns once the
// client has seen the stream's end and removed it, or with the stream connection.
func pipe(ctx context.Context, conn net.Conn, stream io.ReadWriteCloser) error {
	pod := &idleConn{Conn: conn}
	toPod := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, stream)
		if err == nil {
			// The client has no more to send: tell the pod, keep reading its answer
			// while it keeps answering. (A client that vanished looks the same to us,
			// so a pod that stays silent is not waited for forever.)
			pod.expire(halfClosedIdle)
			if hc, ok := conn.(interface{ CloseWrite() error }); ok {
				err = hc.CloseWrite()
			}
		}
		toPod <- err
	}()
	fromPod := make(chan error, 1)
	go func() {
		_, err := io.Copy(stream, pod)
		fromPod <- err
	}()

	var err error
	select {
	case err = <-fromPod:
	case err = <-toPod:
		if err == nil {
			select {
			case err = <-fromPod:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	_ = conn.Close()
	_ = stream.Close()
	return err
}

// halfClosedIdle is how long a forward whose client stopped sending waits for the
// pod's next bytes before it ends.
const halfClosedIdle = 30 * time.Second

// idleConn is a connection whose reads, once expire is called, fail after idle
// without data; each read that returns data extends the deadline.
type idleConn struct {
	net.Conn
	idle atomic.Int64 // nanoseconds; 0 = no deadline
}

func (c *idleConn) expire(idle time.Duration) {
	c.idle.Store(int64(idle))
	_ = c.SetReadDeadline(time.Now().Add(idle))
}

func (c *idleConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if idle := time.Duration(c.idle.Load()); n > 0 && idle > 0 {
		_ = c.SetReadDeadline(time.Now().Add(idle))
	}
	return n, err
}
