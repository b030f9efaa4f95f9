package app

import (
	"context"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/core"
	"github.com/dockpin/cri-dockerd/logctx"
)

// maxMsgSize is the gRPC message limit each way, as upstream (16 MiB).
const maxMsgSize = 16 << 20

// interceptor gives every request a logger with rpc and req_id, bounds it by the
// runtime request timeout, and converts errdefs kinds to gRPC codes: the one place
// where that conversion happens.
type interceptor struct {
	log     logrus.FieldLogger
	timeout time.Duration
	nextID  atomic.Uint64
}

// longRunning RPCs are not bounded by --runtime-request-timeout (as kubelet and upstream).
var longRunning = map[string]bool{"PullImage": true, "ExecSync": true, "Exec": true, "Attach": true, "PortForward": true}

// polling RPCs are logged at debug level; everything else changes state and is logged at info.
func polling(rpc string) bool {
	return strings.HasPrefix(rpc, "List") || strings.HasSuffix(rpc, "Status") ||
		rpc == "ImageFsInfo" || rpc == "Version" || strings.HasSuffix(rpc, "Stats")
}

func (i *interceptor) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	rpc := path.Base(info.FullMethod)
	log := i.log.WithField("rpc", rpc).WithField("req_id", i.nextID.Add(1))
	ctx = logctx.With(ctx, log)
	if !longRunning[rpc] && i.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, i.timeout)
		defer cancel()
	}
	start := time.Now()
	resp, err := handler(ctx, req)
	log = log.WithField("duration", time.Since(start).Round(time.Microsecond))
	if err != nil {
		err = errgrpc.ToGRPC(err)
		entry := log.WithField("code", status.Code(err)).WithError(err)
		if status.Code(err) == codes.NotFound || status.Code(err) == codes.Unimplemented {
			entry.Debug("request failed")
		} else {
			entry.Warn("request failed")
		}
		return resp, err
	}
	if polling(rpc) {
		log.Debug("request done")
	} else {
		log.Info("request done")
	}
	return resp, nil
}

// newGRPCServer returns a server with both CRI services registered.
func newGRPCServer(svc *core.Service, log logrus.FieldLogger, timeout time.Duration) *grpc.Server {
	ic := &interceptor{log: log, timeout: timeout}
	srv := grpc.NewServer(
		grpc.MaxRecvMsgSize(maxMsgSize),
		grpc.MaxSendMsgSize(maxMsgSize),
		grpc.ChainUnaryInterceptor(ic.unary),
	)
	runtimeapi.RegisterRuntimeServiceServer(srv, svc)
	runtimeapi.RegisterImageServiceServer(srv, svc)
	return srv
}
