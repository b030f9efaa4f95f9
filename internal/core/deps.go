package core

// The parts the service calls, declared above it as containerd's CRI image service
// declares its clients: Deps gathers them, and each interface is the narrow view core
// has of a subsystem (its implementation named on the interface).

import (
	"context"
	"time"

	nriapi "github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/checkpoint"
	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/logs"
	"github.com/dockpin/cri-dockerd/internal/core/network"
	"github.com/dockpin/cri-dockerd/internal/core/stats"
	"github.com/dockpin/cri-dockerd/pinning/pin"
)

// Deps are the parts the service calls: the engine, the pinner and the node's
// subsystems. Docker and Pins are required; a nil subsystem is described on its field.
type Deps struct {
	// Docker is the engine (with the image cache and pin keeping in front when enabled).
	Docker docker.Client
	// Pins decides whether images are pinned and why.
	Pins Pinner
	// Preload waits, bounded, for an image a pending preload file provides (ImageStatus
	// of an absent image); nil answers at once.
	Preload PreloadWaiter
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
	// Layers measures containers' writable layers in the background for their stats'
	// WritableLayer; nil leaves it out.
	Layers LayerSizer
	// NRI relays lifecycle events to NRI plugins and returns their adjustments; nil
	// with --enable-nri=false.
	NRI NRI
	// StatusInfo are extra sections of verbose Status, by key (e.g. the image cache's state).
	StatusInfo map[string]func() any
	// Log is the logger of work done outside a request; nil discards.
	Log logrus.FieldLogger
}

// Pinner decides whether images are pinned and why (implemented by pinner.Pinner).
type Pinner interface {
	// Evaluate fails (Unavailable) when a pin source has no usable state.
	Evaluate(ctx context.Context, imgs []pin.Image) ([][]pin.Reason, error)
	Check(ctx context.Context, img pin.Image) []pin.Reason
	Info() map[string]any
}

// PreloadWaiter is implemented by the pinning that preloads images in the background
// (pinning's Setup): WaitPreloaded waits, bounded, while a pending preload file may
// still provide ref and reports whether it waited. ImageStatus of an absent image asks
// it first, so that kubelet does not turn to a registry for an image being preloaded.
type PreloadWaiter interface {
	WaitPreloaded(ctx context.Context, ref string) bool
}

// Network sets up and tears down pod networks (implemented by network.Manager).
type Network interface {
	// Status is nil when a usable network configuration is loaded.
	Status(ctx context.Context) error
	SetUp(ctx context.Context, pn network.PodNetwork) (network.Result, error)
	// TearDown is idempotent and works without the network namespace.
	TearDown(ctx context.Context, pn network.PodNetwork) error
	// PodNetworkStatus returns the addresses SetUp gave a sandbox.
	PodNetworkStatus(ctx context.Context, sandboxID string) (network.Result, error)
	// Attached tells whether an attachment of the sandbox is still recorded (libcni's
	// cache), or cannot be known to be gone.
	Attached(sandboxID string) bool
	SetPodCIDR(cidr string) error
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

// Streamer hands out the URLs of exec, attach and port-forward streams and serves
// them (implemented by streaming.Server).
type Streamer interface {
	GetExec(req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error)
	GetAttach(req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error)
	GetPortForward(req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error)
}

// MetricsCollector reads the CRI metrics of containers and pods (implemented by
// stats.Collector).
type MetricsCollector interface {
	Descriptors() []*runtimeapi.MetricDescriptor
	// Collect returns a container's metrics; NotFound when its process is gone.
	Collect(t stats.Target, now time.Time) ([]*runtimeapi.Metric, error)
	// PodNetwork returns the network counters of a pod's namespace.
	PodNetwork(t stats.Target, now time.Time) ([]*runtimeapi.Metric, error)
	// Usage reads container id's CPU and memory usage from the cgroup of its process
	// pid; NotFound when pid is gone or is not that container's.
	Usage(pid int, id string, now time.Time) (stats.Usage, error)
	// Interfaces reads the interfaces of process pid's network namespace.
	Interfaces(pid int) ([]stats.Interface, error)
}

// LayerSizer measures the writable layers of running containers in the background
// (implemented by stats.Layers).
type LayerSizer interface {
	// Get returns the last measurement of container id's writable layer, if any, and
	// asks for the next: pid is its init process, upperDir the layer the engine names.
	Get(id string, pid int, upperDir string, now time.Time) (stats.Layer, bool)
	// Last returns the last measurement of container id's writable layer, if any,
	// without asking for one.
	Last(id string) (stats.Layer, bool)
}

// NRI relays pod and container lifecycle events to NRI plugins (implemented by
// nri.Runtime). A nil NRI (--enable-nri=false) costs nothing: every call site checks
// s.deps.NRI first.
type NRI interface {
	// BlockSync holds off the synchronisation of connecting plugins until the returned
	// function is called.
	BlockSync() func()
	RunPodSandbox(ctx context.Context, pod *nriapi.PodSandbox) error
	StopPodSandbox(ctx context.Context, pod *nriapi.PodSandbox) error
	RemovePodSandbox(ctx context.Context, pod *nriapi.PodSandbox) error
	CreateContainer(ctx context.Context, pod *nriapi.PodSandbox, ctr *nriapi.Container) (*nriapi.CreateContainerResponse, error)
	PostCreateContainer(ctx context.Context, pod *nriapi.PodSandbox, ctr *nriapi.Container) error
	StartContainer(ctx context.Context, pod *nriapi.PodSandbox, ctr *nriapi.Container) error
	PostStartContainer(ctx context.Context, pod *nriapi.PodSandbox, ctr *nriapi.Container) error
	UpdateContainer(ctx context.Context, pod *nriapi.PodSandbox, ctr *nriapi.Container, res *nriapi.LinuxResources) (*nriapi.UpdateContainerResponse, error)
	PostUpdateContainer(ctx context.Context, pod *nriapi.PodSandbox, ctr *nriapi.Container) error
	StopContainer(ctx context.Context, pod *nriapi.PodSandbox, ctr *nriapi.Container) (*nriapi.StopContainerResponse, error)
	RemoveContainer(ctx context.Context, pod *nriapi.PodSandbox, ctr *nriapi.Container) error
}

// PinKeeper keeps an image's pin across a pull that replaces its record's labels
// (implemented by containerd.Source in pinning/containerd).
type PinKeeper interface {
	// KeepPin is called before ref is pulled; the function it returns is called once
	// after the pull, whatever its outcome, and puts back a pin the pull removed. It
	// logs its own failures.
	KeepPin(ctx context.Context, ref string) func(context.Context)
}
