package core

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/core/checkpoint"
	"github.com/dockpin/cri-dockerd/core/docker"
	"github.com/dockpin/cri-dockerd/core/logs"
	"github.com/dockpin/cri-dockerd/core/stats"
	"github.com/dockpin/cri-dockerd/logctx"
	"github.com/dockpin/cri-dockerd/pinning"
)

// RuntimeName is what Version reports as the runtime name, as upstream.
const RuntimeName = "docker"

// kubeAPIVersion is the version of the CRI API the service implements.
const kubeAPIVersion = "0.1.0"

// Pinner decides whether images are pinned and why (implemented by pinning.Pinner).
type Pinner interface {
	// Evaluate fails (Unavailable) when a pin source has no usable state.
	Evaluate(ctx context.Context, imgs []pinning.Image) ([][]pinning.Reason, error)
	Check(ctx context.Context, img pinning.Image) []pinning.Reason
	Info() map[string]any
}

// Config holds the service's settings, taken from the command line.
type Config struct {
	// ImagePullProgressDeadline cancels pulls without progress for this long.
	ImagePullProgressDeadline time.Duration
	// Effective is the effective configuration, shown as JSON by verbose Status.
	Effective any
	// RecursiveReadOnlyMounts is true when the engine can make read-only mounts
	// recursively read-only (API 1.44, Docker 25); Status reports it to kubelet.
	RecursiveReadOnlyMounts bool
	// ImageVolumes is true when the engine mounts images (its "image" mount type, API
	// 1.48, Docker 28), which CreateContainer's image volumes need.
	ImageVolumes bool
	// ImageVolumeSubpaths is true when the engine mounts a directory of an image (its
	// image mounts' Subpath, known to API 1.51, Docker 28.5, at the latest), which image
	// volumes with an image_sub_path need.
	ImageVolumeSubpaths bool
	// CredentialFiles are docker config.json files searched for the credentials of the
	// sandbox image's registry (DefaultCredentialFiles on a node).
	CredentialFiles []string
	// SandboxImage is --pod-infra-container-image, the image of every sandbox's pause container.
	SandboxImage string
	// RefusePinnedRemoval makes RemoveImage refuse a pinned image (FailedPrecondition,
	// naming the pin and how to unpin): --restore-pinned-images would put it back.
	RefusePinnedRemoval bool
	// EngineLog bounds the engine's own copy of the output of containers whose output
	// the log copier keeps in a CRI log file.
	EngineLog EngineLogLimits
}

// Deps are the parts the service calls: the engine, the pinner and the node's
// subsystems. Docker and Pins are required; a nil subsystem is described on its field.
type Deps struct {
	// Docker is the engine (with the image cache and pin keeping in front when enabled).
	Docker docker.Client
	// Pins decides whether images are pinned and why.
	Pins Pinner
	// Network sets up and tears down pod networks; nil with --network-plugin="" (Docker's bridge).
	Network Network
	// Checkpoints keeps one checkpoint per sandbox (required by the sandbox RPCs).
	Checkpoints Checkpoints
	// Logs copies container output into CRI log files; nil leaves logs to the engine only.
	Logs LogCopier
	// Streaming serves exec, attach and port-forward; nil answers them Unimplemented.
	Streaming Streamer
	// Metrics reads the CRI metrics of containers and pods from the host; nil answers
	// ListMetricDescriptors and ListPodSandboxMetrics Unimplemented.
	Metrics MetricsCollector
	// NRI relays lifecycle events to NRI plugins and returns their adjustments; nil
	// with --enable-nri=false.
	NRI NRI
	// StatusInfo are extra sections of verbose Status, by key (e.g. the image cache's state).
	StatusInfo map[string]func() any
	// Log is the logger of work done outside a request; nil discards.
	Log logrus.FieldLogger
}

// MetricsCollector reads the CRI metrics of containers and pods (implemented by
// stats.Collector).
type MetricsCollector interface {
	Descriptors() []*runtimeapi.MetricDescriptor
	// Collect returns a container's metrics; NotFound when its process is gone.
	Collect(t stats.Target, now time.Time) ([]*runtimeapi.Metric, error)
	// PodNetwork returns the network counters of a pod's namespace.
	PodNetwork(t stats.Target, now time.Time) ([]*runtimeapi.Metric, error)
}

// Checkpoints stores sandbox checkpoints (implemented by checkpoint.Store).
type Checkpoints interface {
	Write(id string, c *checkpoint.Checkpoint) error
	// Read returns NotFound when there is none and DataLoss when it is corrupt.
	Read(id string) (*checkpoint.Checkpoint, error)
	Remove(id string) error
	List() ([]string, error)
}

// LogCopier writes container output to CRI log files (implemented by logs.Manager).
type LogCopier interface {
	// Record records the log file chosen for container id at its creation.
	Record(id string, f logs.LogFile) error
	// Recorded returns the log file recorded for container id.
	Recorded(id string) (logs.LogFile, bool)
	// Forget drops the record of a removed container.
	Forget(id string)
	// AdoptsLabels tells that nothing was recorded on this node before: containers
	// that an earlier version of this binary created may be recorded from their log
	// path label when their logs are resumed at start-up.
	AdoptsLabels() bool
	// Start copies container id's output to its recorded log file; NotFound without one.
	Start(ctx context.Context, id string) error
	Stop(id string)
	Reopen(id string) error
	// Wait returns when the copy of a finished container's output is complete, or
	// when ctx ends; an error when id is not being copied.
	Wait(ctx context.Context, id string) error
}

// Service implements the CRI RuntimeService and ImageService.
type Service struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	docker docker.Client
	pins   Pinner
	cfg    Config
	deps   Deps
	log    logrus.FieldLogger
	info   *infoCache // the engine's /info, reused briefly (engineInfo)
	// tornDown are the sandboxes whose network this process tore down. Once such a
	// sandbox's pause container is stopped too, another teardown (RemovePodSandbox
	// after StopPodSandbox, StopPodSandbox again) has nothing left to release unless
	// an attachment was recorded again since, and is skipped: a DEL runs every plugin
	// of the network. After a restart nothing is remembered, and every teardown runs
	// in full.
	tornDown *idSet
	// created are the Kubernetes containers (not sandboxes) this process created, by
	// full ID. An engine ID names one container for good, so StopContainer and
	// RemoveContainer of such an ID skip the inspect that tells what it names (one
	// engine round trip; upstream's StopContainer makes none). A container removed
	// behind our back then answers NotFound to the stop or removal: success, as the
	// CRI asks.
	created *idSet
	// nri is deps.NRI (nil: off); nriState what relaying to it remembers.
	nri      NRI
	nriState *nriState
}

// New returns a Service with the settings cfg over the parts deps.
func New(cfg Config, deps Deps) *Service {
	return &Service{docker: deps.Docker, pins: deps.Pins, cfg: cfg, deps: deps, log: logctx.OrDiscard(deps.Log), info: &infoCache{}, tornDown: &idSet{}, created: &idSet{},
		nri: deps.NRI, nriState: newNRIState()}
}

// timed runs step as the phase name of the request in ctx (logctx.Time): the work
// besides engine calls and CNI plugins (which time themselves) that a request waits
// for, such as a checkpoint write.
func timed(ctx context.Context, name string, step func() error) error {
	defer logctx.Time(ctx, name)()
	return step()
}

// logger returns the request's logger (method and request id), or the service's
// when ctx carries none.
func (s *Service) logger(ctx context.Context) logrus.FieldLogger {
	return logctx.For(ctx, s.log)
}
