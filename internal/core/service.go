package core

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/logctx"
)

// RuntimeName is what Version reports as the runtime name, as upstream.
const RuntimeName = "docker"

// kubeAPIVersion is the version of the CRI API the service implements.
const kubeAPIVersion = "0.1.0"

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

// Service implements the CRI RuntimeService and ImageService.
type Service struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	cfg  Config
	deps Deps
	log  logrus.FieldLogger
	info *infoCache // the engine's /info, reused briefly (engineInfo)
	// tornDown are the sandboxes whose network this process tore down. Once such a
	// sandbox's pause container is stopped too, another teardown (RemovePodSandbox
	// after StopPodSandbox, StopPodSandbox again) has nothing left to release unless
	// an attachment was recorded again since, and is skipped: a DEL runs every plugin
	// of the network. After a restart nothing is remembered, and every teardown runs
	// in full.
	tornDown *idSet
	// pids are the init processes of running containers, by ID, learnt from an
	// inspect: stats read their cgroups (Deps.Metrics) without an engine call. A pid
	// is checked to be in the container's cgroup at each read (the kernel reuses pids)
	// and asked again when it is not.
	pids *idMap[proc]
	// created are the Kubernetes containers (not sandboxes) this process created, by
	// full ID. An engine ID names one container for good, so StopContainer and
	// RemoveContainer of such an ID skip the inspect that tells what it names (one
	// engine round trip; upstream's StopContainer makes none). A container removed
	// behind our back then answers NotFound to the stop or removal: success, as the
	// CRI asks.
	created *idSet
	// nriState is what relaying to deps.NRI (nil: off) remembers.
	nriState *nriState
	// cpuRates keeps a CPU sample of each container and sandbox for their usage in cores.
	cpuRates *cpuRates
	// host reads what checkpoints take from this host (procHost; tests set a fake).
	host containerHost
}

// New returns a Service with the settings cfg over the parts deps.
func New(cfg Config, deps Deps) *Service {
	return &Service{cfg: cfg, deps: deps, log: logctx.OrDiscard(deps.Log), info: &infoCache{}, tornDown: &idSet{}, created: &idSet{},
		pids: &idMap[proc]{}, nriState: newNRIState(), cpuRates: &cpuRates{}, host: procHost{}}
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
