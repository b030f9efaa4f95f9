package core

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/core/docker"
	"github.com/dockpin/cri-dockerd/pinning"
)

// RuntimeName is what Version reports as the runtime name, as upstream.
const RuntimeName = "docker"

// kubeAPIVersion is the version of the CRI API the service implements.
const kubeAPIVersion = "0.1.0"

// Pinner decides whether images are pinned and why (implemented by pinning.Pinner).
type Pinner interface {
	Evaluate(ctx context.Context, imgs []pinning.Image) [][]pinning.Reason
	Check(ctx context.Context, img pinning.Image) []pinning.Reason
	Info() map[string]any
}

// PinKeeper keeps an image's pin across a pull that replaces its record's labels
// (implemented by pinning.ContainerdSource).
type PinKeeper interface {
	// KeepPin is called before ref is pulled; the function it returns is called after
	// a successful pull and puts back a pin the pull removed. It logs its own failures.
	KeepPin(ctx context.Context, ref string) func(context.Context)
}

// Config is what the CRI service needs from the command line.
type Config struct {
	// NetworkPlugin is --network-plugin: "cni" or "" (Docker's default bridge).
	NetworkPlugin string
	// CNIConfDir is --cni-conf-dir; NetworkReady needs a config there when NetworkPlugin is "cni".
	CNIConfDir string
	// ImagePullProgressDeadline cancels pulls without progress for this long.
	ImagePullProgressDeadline time.Duration
	// Effective is the effective configuration, shown as JSON by verbose Status.
	Effective any
	// PinKeeper, when set, keeps pins across our own pulls.
	PinKeeper PinKeeper
	// StatusInfo are extra sections of verbose Status, by key (e.g. the image cache's state).
	StatusInfo map[string]func() any
}

// Service implements the CRI RuntimeService and ImageService.
type Service struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	docker docker.Client
	pins   Pinner
	cfg    Config
	log    logrus.FieldLogger
}

// New returns a Service using client for the engine and pins for pinning.
func New(cfg Config, client docker.Client, pins Pinner, log logrus.FieldLogger) *Service {
	return &Service{docker: client, pins: pins, cfg: cfg, log: log}
}

type loggerKey struct{}

// WithLogger returns ctx carrying log; the gRPC interceptor sets it per request.
func WithLogger(ctx context.Context, log logrus.FieldLogger) context.Context {
	return context.WithValue(ctx, loggerKey{}, log)
}

// logger returns the request's logger, or the service's when there is none.
func (s *Service) logger(ctx context.Context) logrus.FieldLogger {
	if l, ok := ctx.Value(loggerKey{}).(logrus.FieldLogger); ok {
		return l
	}
	return s.log
}
