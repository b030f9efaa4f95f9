package app

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core"
	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/internal/metrics"
)

// maxMsgSize is the gRPC message limit each way, as upstream (16 MiB).
const maxMsgSize = 16 << 20

// interceptor gives every request a logger with rpc and req_id, bounds it by the
// runtime request timeout, recovers a panicking handler, and converts errdefs kinds
// to gRPC codes: the one place where that conversion happens. It serves unary RPCs
// and, with the same logger, recovery and conversion, server-streaming ones.
type interceptor struct {
	log     logrus.FieldLogger
	timeout time.Duration
	nextID  atomic.Uint64
}

// longRunning RPCs are not bounded by --runtime-request-timeout (as kubelet and upstream).
var longRunning = map[string]bool{"PullImage": true, "ExecSync": true, "Exec": true, "Attach": true, "PortForward": true}

// polling RPCs are logged at debug level; everything else changes state and is logged at info.
func polling(rpc string) bool {
	return strings.HasPrefix(rpc, "List") || strings.HasPrefix(rpc, "Stream") || strings.HasSuffix(rpc, "Status") ||
		rpc == "ImageFsInfo" || rpc == "Version" || strings.HasSuffix(rpc, "Stats")
}

// streamingList names, for each unary list, the streaming RPC (KEP-5825) that serves
// the same list in chunks; the name a client needs when the unary answer is too large.
func streamingList(rpc string) string {
	switch rpc {
	case "ListContainers":
		return "StreamContainers"
	case "ListPodSandbox":
		return "StreamPodSandboxes"
	case "ListImages":
		return "StreamImages"
	case "ListContainerStats", "ListPodSandboxStats", "ListPodSandboxMetrics":
		return "Stream" + strings.TrimPrefix(rpc, "List")
	}
	return ""
}

// tooLarge fails a list answer that gRPC would refuse to send (over maxMsgSize) with
// ResourceExhausted naming the streaming RPC, instead of the transport's error. The
// answer is measured only when it has enough items to come near the limit (measuring
// is a walk of the whole answer, a few percent of our CPU on a busy node if done for
// every relist); a smaller one that still passed it (pods with huge annotations) gets
// gRPC's own ResourceExhausted.
func tooLarge(rpc string, resp any) error {
	stream := streamingList(rpc)
	m, ok := resp.(proto.Message)
	if stream == "" || !ok || listItems(resp) < measureFrom(resp) {
		return nil
	}
	if n := proto.Size(m); n > maxMsgSize {
		return fmt.Errorf("%s: the answer is %d bytes, over the %d-byte gRPC message limit; use %s (kubelet: feature gate CRIListStreaming): %w",
			rpc, n, maxMsgSize, stream, cerrdefs.ErrResourceExhausted)
	}
	return nil
}

// listItems counts the items of a list answer.
func listItems(resp any) int {
	switch r := resp.(type) {
	case *runtimeapi.ListContainersResponse:
		return len(r.GetContainers())
	case *runtimeapi.ListPodSandboxResponse:
		return len(r.GetItems())
	case *runtimeapi.ListImagesResponse:
		return len(r.GetImages())
	case *runtimeapi.ListContainerStatsResponse:
		return len(r.GetStats())
	case *runtimeapi.ListPodSandboxStatsResponse:
		return len(r.GetStats())
	case *runtimeapi.ListPodSandboxMetricsResponse:
		return len(r.GetPodMetrics())
	}
	return 0
}

// measureFrom is how many items a list answer needs before it is measured: about a
// thousandth of the limit's worth of items (a container is about 1.5 KB with kubelet's
// labels; a pod's metrics or stats, with its containers', ten times that).
func measureFrom(resp any) int {
	switch resp.(type) {
	case *runtimeapi.ListPodSandboxMetricsResponse, *runtimeapi.ListPodSandboxStatsResponse:
		return 100
	}
	return 1000
}

func (i *interceptor) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	rpc := path.Base(info.FullMethod)
	var resp any
	err := i.serve(ctx, rpc, !longRunning[rpc], func(ctx context.Context) error {
		var err error
		if resp, err = handler(ctx, req); err != nil {
			return err
		}
		return tooLarge(rpc, resp)
	})
	return resp, err
}

// stream serves a server-streaming RPC as unary serves the others. A streaming list
// (Stream*) is a list and is bounded by the request timeout; other streams (events) are
// long-lived.
func (i *interceptor) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	rpc := path.Base(info.FullMethod)
	return i.serve(ss.Context(), rpc, strings.HasPrefix(rpc, "Stream"), func(ctx context.Context) error {
		return handler(srv, &ctxStream{ServerStream: ss, ctx: ctx})
	})
}

// ctxStream is a server stream whose handler sees the interceptor's context.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

// serve runs the handler call with the request's logger in ctx, bounded by the
// request timeout when bounded, and returns its error converted to a gRPC status.
func (i *interceptor) serve(ctx context.Context, rpc string, bounded bool, call func(context.Context) error) error {
	log := i.log.WithField("rpc", rpc).WithField("req_id", i.nextID.Add(1))
	ctx = logctx.With(ctx, log)
	if bounded && i.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, i.timeout)
		defer cancel()
	}
	ctx, phases := logctx.WithPhases(ctx)
	start := time.Now()
	err := recovered(log, rpc, func() error { return call(ctx) })
	took := time.Since(start)
	log = log.WithField("duration", took.Round(time.Microsecond))
	if f := phases.Fields(); len(f) > 0 {
		// Where the time went: engine calls, CNI plugins, file writes; t.rest is ours
		// (below zero when phases overlap, as StopPodSandbox's do).
		log.WithFields(f).WithField("t.rest", (took - phases.Total()).Round(time.Microsecond)).Debug("request phases")
	}
	if err != nil {
		err = errgrpc.ToGRPC(err)
		entry := log.WithField("code", status.Code(err)).WithError(err)
		if status.Code(err) == codes.NotFound || status.Code(err) == codes.Unimplemented {
			entry.Debug("request failed")
		} else {
			entry.Warn("request failed")
		}
		return err
	}
	if polling(rpc) {
		log.Debug("request done")
	} else {
		log.Info("request done")
	}
	return nil
}

// recovered runs fn and turns a panic in it into an Internal error naming rpc,
// logged at error level with the stack: a bug in one handler fails that request,
// not the daemon every pod on the node depends on.
func recovered(log logrus.FieldLogger, rpc string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			log.WithField("panic", fmt.Sprint(p)).WithField("stack", string(debug.Stack())).
				Error("request handler panicked; answering Internal")
			err = status.Errorf(codes.Internal, "%s: internal error: handler panicked: %v", rpc, p)
		}
	}()
	return fn()
}

// criServer is both CRI services (core.Service).
type criServer interface {
	runtimeapi.RuntimeServiceServer
	runtimeapi.ImageServiceServer
}

var _ criServer = (*core.Service)(nil)

// newGRPCServer returns a server with both CRI services registered; with metrics (not
// nil), every RPC is counted and timed, outside our interceptor so that the code counted
// is the one the client gets.
func newGRPCServer(svc criServer, log logrus.FieldLogger, timeout time.Duration, prom *metrics.Metrics) *grpc.Server {
	ic := &interceptor{log: log, timeout: timeout}
	unary := []grpc.UnaryServerInterceptor{ic.unary}
	stream := []grpc.StreamServerInterceptor{ic.stream}
	if prom != nil {
		u, s := prom.Instrument()
		unary = append([]grpc.UnaryServerInterceptor{u}, unary...)
		stream = append([]grpc.StreamServerInterceptor{s}, stream...)
	}
	srv := grpc.NewServer(
		grpc.MaxRecvMsgSize(maxMsgSize),
		grpc.MaxSendMsgSize(maxMsgSize),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
	)
	runtimeapi.RegisterRuntimeServiceServer(srv, svc)
	runtimeapi.RegisterImageServiceServer(srv, svc)
	if prom != nil {
		prom.Initialize(srv)
	}
	return srv
}

// serving is what serve runs: the gRPC server on its listener, until SIGTERM or
// SIGINT (a graceful stop bounded by timeout), the server failing, or failed
// delivering an error (a part without which the runtime must not serve).
type serving struct {
	srv     *grpc.Server
	lis     net.Listener
	timeout time.Duration
	// hup delivers SIGHUP; reload is called for each.
	hup    <-chan os.Signal
	reload func()
	// failed, when not nil, delivers the error of a part the runtime cannot serve without.
	failed <-chan error
}

// serve serves, tells systemd it is ready (sd_notify), and stops as serving says.
func serve(s serving, log logrus.FieldLogger) error {
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(s.lis) }()
	if ok, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
		log.WithError(err).Warn("sd_notify READY failed")
	} else if ok {
		log.Debug("sent sd_notify READY")
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(signals)
	for {
		select {
		case err := <-served:
			return fmt.Errorf("grpc server: %w", err)
		case err := <-s.failed:
			// Let the supervisor restart us rather than serve half a runtime.
			s.srv.Stop()
			return err
		case <-s.hup:
			s.reload()
		case sig := <-signals:
			log.WithField("signal", sig.String()).Info("stopping: waiting for in-flight requests")
			_, _ = daemon.SdNotify(false, daemon.SdNotifyStopping)
			gracefulStop(s.srv, s.timeout, log)
			return nil
		}
	}
}
