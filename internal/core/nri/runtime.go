package nri

import (
	"context"
	"fmt"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/sirupsen/logrus"
)

// runtimeName is the name the runtime registers with plugins under.
const runtimeName = "cri-dockerd"

// syncTimeout bounds reading the runtime's state for a newly connected plugin.
const syncTimeout = 30 * time.Second

// Host is the container runtime as NRI sees it (implemented by core.Service).
type Host interface {
	// NRIState returns the pods and containers a newly connected plugin is
	// synchronised with.
	NRIState(ctx context.Context) ([]*api.PodSandbox, []*api.Container, error)
	// NRIUpdate applies container updates plugins asked for on their own (or in
	// Synchronize) and returns those that failed.
	NRIUpdate(ctx context.Context, updates []*api.ContainerUpdate) ([]*api.ContainerUpdate, error)
}

// Runtime is NRI's runtime side: the plugin socket, the plugins and the relay of
// events to them, in the plugins' order, one event at a time.
type Runtime struct {
	cfg  Config
	nri  *adaptation.Adaptation
	host Host
	log  logrus.FieldLogger
}

// New prepares NRI; Start serves it. version is the runtime's version as plugins
// are told.
func New(cfg Config, version string, log logrus.FieldLogger) (*Runtime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Runtime{cfg: cfg, log: log}
	a, err := adaptation.New(runtimeName, version, r.synchronize, r.update,
		adaptation.WithSocketPath(cfg.SocketPath),
		adaptation.WithPluginPath(cfg.PluginPath),
		adaptation.WithPluginConfigPath(cfg.PluginConfigPath))
	if err != nil {
		return nil, fmt.Errorf("nri: %w", err)
	}
	r.nri = a
	return r, nil
}

// Start sets the library's timeouts and logger (process-wide in the library: one
// Runtime per process), starts the pre-installed plugins, synchronised with host,
// and listens on the socket.
func (r *Runtime) Start(host Host) error {
	r.host = host
	adaptation.SetPluginRegistrationTimeout(r.cfg.RegistrationTimeout)
	adaptation.SetPluginRequestTimeout(r.cfg.RequestTimeout)
	nrilog.Set(logger{r.log})
	if err := r.nri.Start(); err != nil {
		return fmt.Errorf("nri: start on %s: %w", r.cfg.SocketPath, err)
	}
	return nil
}

// Stop closes the socket and disconnects the plugins.
func (r *Runtime) Stop() { r.nri.Stop() }

// BlockSync holds off the synchronisation of newly connecting plugins until the
// returned function is called: a pod or container being made while it is held is
// either in a later plugin's Synchronize or relayed to it, never lost.
func (r *Runtime) BlockSync() func() {
	b := r.nri.BlockPluginSync()
	return b.Unblock
}

// synchronize is the adaptation's SyncFn: the host's state to a new plugin, and the
// updates the plugin answers with applied.
func (r *Runtime) synchronize(ctx context.Context, cb adaptation.SyncCB) error {
	sctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	pods, ctrs, err := r.host.NRIState(sctx)
	if err != nil {
		return fmt.Errorf("read pods and containers for plugin synchronisation: %w", err)
	}
	updates, err := cb(ctx, pods, ctrs)
	if err != nil {
		return err
	}
	if len(updates) == 0 {
		return nil
	}
	failed, err := r.host.NRIUpdate(sctx, updates)
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d container updates of plugin synchronisation failed", len(failed))
	}
	return nil
}

// update is the adaptation's UpdateFn.
func (r *Runtime) update(ctx context.Context, updates []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	return r.host.NRIUpdate(ctx, updates)
}

// RunPodSandbox relays a pod's start; an error fails RunPodSandbox.
func (r *Runtime) RunPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	return r.nri.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod})
}

// StopPodSandbox relays a pod's stop (its containers are stopped already).
func (r *Runtime) StopPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	return r.nri.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: pod})
}

// RemovePodSandbox relays a pod's removal.
func (r *Runtime) RemovePodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	return r.nri.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: pod})
}

// CreateContainer relays a container's creation and returns the plugins' merged
// adjustments, and their updates to, and evictions of, other containers.
func (r *Runtime) CreateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.CreateContainerResponse, error) {
	return r.nri.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: ctr})
}

// PostCreateContainer tells plugins a container was created.
func (r *Runtime) PostCreateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	return r.nri.PostCreateContainer(ctx, &api.PostCreateContainerRequest{Pod: pod, Container: ctr})
}

// StartContainer relays a container's start, before the engine starts it.
func (r *Runtime) StartContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	return r.nri.StartContainer(ctx, &api.StartContainerRequest{Pod: pod, Container: ctr})
}

// PostStartContainer tells plugins a container was started.
func (r *Runtime) PostStartContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	return r.nri.PostStartContainer(ctx, &api.PostStartContainerRequest{Pod: pod, Container: ctr})
}

// UpdateContainer relays a resource update; the answer holds the resources to apply
// (res as the plugins adjusted it) and updates to other containers.
func (r *Runtime) UpdateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container, res *api.LinuxResources) (*api.UpdateContainerResponse, error) {
	return r.nri.UpdateContainer(ctx, &api.UpdateContainerRequest{Pod: pod, Container: ctr, LinuxResources: res})
}

// PostUpdateContainer tells plugins a container's resources were updated.
func (r *Runtime) PostUpdateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	return r.nri.PostUpdateContainer(ctx, &api.PostUpdateContainerRequest{Pod: pod, Container: ctr})
}

// StopContainer relays that a container stopped (asked to, or on its own).
func (r *Runtime) StopContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.StopContainerResponse, error) {
	return r.nri.StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: ctr})
}

// RemoveContainer relays a container's removal.
func (r *Runtime) RemoveContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	return r.nri.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: ctr})
}

// logger routes the library's log lines to logrus.
type logger struct{ l logrus.FieldLogger }

func (g logger) Debugf(_ context.Context, f string, a ...any) { g.l.Debugf(f, a...) }
func (g logger) Infof(_ context.Context, f string, a ...any)  { g.l.Infof(f, a...) }
func (g logger) Warnf(_ context.Context, f string, a ...any)  { g.l.Warnf(f, a...) }
func (g logger) Errorf(_ context.Context, f string, a ...any) { g.l.Errorf(f, a...) }
