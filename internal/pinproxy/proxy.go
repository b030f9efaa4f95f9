package pinproxy

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dockpin/cri-dockerd/internal/logctx"
	"github.com/dockpin/cri-dockerd/pinning/pin"
)

// Pinner decides pins (pinner.Pinner): Evaluate for a whole list, failing when a pin
// source has no usable state; Check for one image, never failing; Info for crictl info.
type Pinner interface {
	Evaluate(ctx context.Context, imgs []pin.Image) ([][]pin.Reason, error)
	Check(ctx context.Context, img pin.Image) []pin.Reason
	Info() map[string]any
}

// Engine gives the image facts the CRI does not carry: config labels, by image ID.
type Engine interface {
	// ImageLabels returns the config labels of every image of the engine, by image ID.
	ImageLabels(ctx context.Context) (map[string]map[string]string, error)
	// ImageLabelsOf returns the config labels of one image; an errdefs NotFound when it is gone.
	ImageLabelsOf(ctx context.Context, id string) (map[string]string, error)
}

// Proxy serves the CRI by forwarding it to a backend.
type Proxy struct {
	conn   *grpc.ClientConn
	target string // the backend's endpoint, for crictl info
	pins   Pinner
	engine Engine
	log    logrus.FieldLogger
}

// maxMsgSize is the gRPC message limit each way, as upstream cri-dockerd's (16 MiB).
const maxMsgSize = 16 << 20

// reconnectMaxDelay bounds the wait between attempts to reach a backend that went away:
// once it is back, RPCs work again within about this long.
const reconnectMaxDelay = time.Second

// Dial returns a connection to the backend at target (unix:///path or a host:port);
// it connects lazily and reconnects by itself. extra are added to the dial options (tests).
func Dial(target string, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	bo := backoff.DefaultConfig
	bo.MaxDelay = reconnectMaxDelay
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: 5 * time.Second}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
	}, extra...)
	return grpc.NewClient(target, opts...)
}

// New returns a proxy forwarding to conn. A nil log discards messages.
func New(conn *grpc.ClientConn, pins Pinner, engine Engine, log logrus.FieldLogger) *Proxy {
	return &Proxy{conn: conn, target: conn.Target(), pins: pins, engine: engine, log: logctx.OrDiscard(log)}
}

// ServerOptions make a gRPC server with no service registered hand every RPC to the proxy.
func (p *Proxy) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.UnknownServiceHandler(p.handle),
		grpc.ForceServerCodec(rawCodec{}),
		grpc.MaxRecvMsgSize(maxMsgSize),
		grpc.MaxSendMsgSize(maxMsgSize),
	}
}

// The RPCs whose answer the proxy changes.
const (
	listImagesMethod   = "/runtime.v1.ImageService/ListImages"
	imageStatusMethod  = "/runtime.v1.ImageService/ImageStatus"
	streamImagesMethod = "/runtime.v1.ImageService/StreamImages"
	statusMethod       = "/runtime.v1.RuntimeService/Status"
)

// passthrough describes any RPC: a stream each way covers unary and streaming ones.
var passthrough = grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

func (p *Proxy) handle(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "proxy: no method name in the stream")
	}
	ctx := outgoing(ss.Context())
	switch method {
	case listImagesMethod:
		return p.listImages(ctx, ss)
	case imageStatusMethod:
		return p.imageStatus(ctx, ss)
	case streamImagesMethod:
		return p.streamImages(ctx, ss)
	case statusMethod:
		return p.status(ctx, ss)
	}
	return p.forward(ctx, ss, method)
}

// outgoing carries the caller's metadata (not the transport's own headers) to the backend.
func outgoing(ctx context.Context) context.Context {
	in, _ := metadata.FromIncomingContext(ctx)
	md := make(metadata.MD, len(in))
	for k, v := range in {
		if strings.HasPrefix(k, ":") || k == "content-type" || k == "user-agent" || k == "te" {
			continue
		}
		md[k] = v
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// forward relays one RPC frame by frame both ways, with its headers, trailers and status.
func (p *Proxy) forward(ctx context.Context, ss grpc.ServerStream, method string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, err := p.conn.NewStream(ctx, &passthrough, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	go relayRequests(ss, cs)
	if md, err := cs.Header(); err == nil && len(md) > 0 {
		if err := ss.SendHeader(md); err != nil {
			return err
		}
	}
	for {
		var f frame
		if err := cs.RecvMsg(&f); err != nil {
			ss.SetTrailer(cs.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err // the backend's status, or Unavailable when it is gone
		}
		if err := ss.SendMsg(&f); err != nil {
			return err
		}
	}
}

// relayRequests sends the caller's frames to the backend until the caller closes its
// side. An error ends the relay: the caller's cancellation reaches the backend through
// the context, and the backend's own status through forward's RecvMsg.
func relayRequests(ss grpc.ServerStream, cs grpc.ClientStream) {
	for {
		var f frame
		if err := ss.RecvMsg(&f); err != nil {
			if errors.Is(err, io.EOF) {
				_ = cs.CloseSend()
			}
			return
		}
		if err := cs.SendMsg(&f); err != nil {
			return
		}
	}
}
