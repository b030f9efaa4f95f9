package core

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/logs"
)

// CreateContainer creates a container in a sandbox: it joins the sandbox's network,
// IPC and (unless asked otherwise) PID namespaces.
func (s *Service) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	cfg, sbCfg := req.GetConfig(), req.GetSandboxConfig()
	if cfg.GetMetadata().GetName() == "" {
		return nil, fmt.Errorf("container metadata needs a name: %w", cerrdefs.ErrInvalidArgument)
	}
	if cfg.GetImage().GetImage() == "" {
		return nil, fmt.Errorf("container %q has no image: %w", cfg.GetMetadata().GetName(), cerrdefs.ErrInvalidArgument)
	}
	sb, err := s.sandboxInspect(ctx, req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	if s.hidden(sb.ID) {
		return nil, fmt.Errorf("pod sandbox %s is still being run (its NRI plugins have not returned): %w", sb.ID, cerrdefs.ErrFailedPrecondition)
	}
	if sb.State != docker.StateRunning {
		// A stopped sandbox is never reused (its namespaces are gone); kubelet makes a new one.
		return nil, fmt.Errorf("pod sandbox %s is not running (%s): %w", sb.ID, sb.State, cerrdefs.ErrFailedPrecondition)
	}
	spec, err := s.containerSpec(ctx, sb.ID, cfg, sbCfg)
	if err != nil {
		return nil, err
	}
	spec.Runtime = sb.Runtime // the pod's runtime handler
	if info, err := s.engineInfo(ctx); err == nil && runcShim(info, spec.Runtime) {
		// One shim process serves the pod, as under containerd's CRI: the runc shim
		// runs a container whose OCI spec names a sandbox in this annotation from that
		// sandbox's shim instead of starting one of its own.
		spec.Annotations = map[string]string{annotationShimGroup: sb.ID}
	}
	if dir, p := sbCfg.GetLogDirectory(), cfg.GetLogPath(); dir != "" && p != "" && s.deps.Logs != nil {
		spec.LogConfig = s.engineLogConfig(ctx)
	}
	if s.deps.NRI != nil {
		// A plugin connecting meanwhile is synchronised with the container or told of it.
		defer s.deps.NRI.BlockSync()()
	}
	id, show, err := s.createAdjusted(ctx, sb, cfg, spec)
	if err != nil {
		return nil, fmt.Errorf("create container %s: %w", spec.Name, err)
	}
	defer show()
	if dir, p := sbCfg.GetLogDirectory(), cfg.GetLogPath(); dir != "" && p != "" && s.deps.Logs != nil {
		if err := timed(ctx, "logs.record", func() error { return s.deps.Logs.Record(id, logs.LogFile{Dir: dir, Name: p}) }); err != nil {
			if s.deps.NRI != nil {
				s.undoCreate(ctx, nriPod(sb, nil), nriContainerOfSpec(id, sb.ID, cfg, spec))
			} else if rmErr := ignoreNotFound(s.deps.Docker.RemoveContainer(ctx, id)); rmErr != nil {
				s.logger(ctx).WithError(rmErr).WithField("container", id).Warn("cannot remove the container whose log cannot be recorded")
			}
			return nil, fmt.Errorf("create container %s: record its log file: %w", spec.Name, err)
		}
	}
	if s.deps.NRI != nil {
		if err := s.deps.NRI.PostCreateContainer(ctx, nriPod(sb, nil), nriContainerOfSpec(id, sb.ID, cfg, spec)); err != nil {
			s.logger(ctx).WithError(err).WithField("container", id).Warn("NRI PostCreateContainer failed")
		}
	}
	s.created.add(id)
	s.logger(ctx).WithField("container", id).WithField("name", spec.Name).Info("container created")
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

// containerSpec builds the engine container of a CRI container config.
func (s *Service) containerSpec(ctx context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig) (docker.ContainerSpec, error) {
	labels := makeLabels(cfg.GetLabels(), cfg.GetAnnotations())
	labels[labelContainerType] = typeContainer
	labels[labelSandboxID] = sandboxID
	if dir, p := sbCfg.GetLogDirectory(), cfg.GetLogPath(); dir != "" && p != "" {
		labels[labelLogPath] = filepath.Join(dir, p)
	}
	spec := docker.ContainerSpec{
		Name:        makeContainerName(sbCfg, cfg.GetMetadata()),
		Image:       cfg.GetImage().GetImage(),
		Labels:      labels,
		Entrypoint:  cfg.GetCommand(),
		Cmd:         cfg.GetArgs(),
		WorkingDir:  cfg.GetWorkingDir(),
		Tty:         cfg.GetTty(),
		OpenStdin:   cfg.GetStdin(),
		StdinOnce:   cfg.GetStdinOnce(),
		NetworkMode: modeContainer + sandboxID,
		IpcMode:     modeContainer + sandboxID,
		PidMode:     modeContainer + sandboxID,
		// kubelet probes containers; an image's HEALTHCHECK would run engine execs.
		NoHealthcheck: true,
	}
	if hostNetwork(sbCfg) {
		spec.UTSMode = modeHost // the node's hostname, as the sandbox has
	}
	if sig := cfg.GetStopSignal(); sig != runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
		spec.StopSignal = strings.TrimPrefix(sig.String(), "SIGNAL_")
	}
	for _, kv := range cfg.GetEnvs() {
		spec.Env = append(spec.Env, kv.GetKey()+"="+string(kv.GetValue()))
	}
	for _, m := range cfg.GetMounts() {
		if err := checkMount(m); err != nil {
			return spec, err
		}
		if m.GetImage().GetImage() != "" {
			im, err := s.imageMount(m)
			if err != nil {
				return spec, err
			}
			if err := s.checkImageSubPath(ctx, im); err != nil {
				return spec, err
			}
			spec.ImageMounts = append(spec.ImageMounts, im)
			continue
		}
		if m.GetRecursiveReadOnly() && (!m.GetReadonly() || m.GetPropagation() != runtimeapi.MountPropagation_PROPAGATION_PRIVATE) {
			return spec, fmt.Errorf("mount %s: recursive read-only needs a read-only mount with private propagation: %w",
				m.GetContainerPath(), cerrdefs.ErrInvalidArgument)
		}
		spec.Mounts = append(spec.Mounts, docker.Mount{
			Source: m.GetHostPath(), Target: m.GetContainerPath(), ReadOnly: m.GetReadonly(),
			RecursiveReadOnly: m.GetRecursiveReadOnly(),
			Propagation:       propagation[m.GetPropagation()], SELinuxRelabel: m.GetSelinuxRelabel(),
		})
	}
	var err error
	if spec.Devices, spec.CDIDevices, err = s.containerDevices(ctx, cfg); err != nil {
		return spec, err
	}
	lx := cfg.GetLinux()
	if r := lx.GetResources(); r != nil {
		res, err := s.engineResources(ctx, r)
		if err != nil {
			return spec, err
		}
		spec.Resources = res
		spec.OomScoreAdj = int(r.GetOomScoreAdj())
	}
	info, err := s.engineInfo(ctx)
	if err != nil {
		return spec, err
	}
	if spec.CgroupParent, err = cgroupParent(info.CgroupDriver, sbCfg.GetLinux().GetCgroupParent()); err != nil {
		return spec, err
	}
	sc := lx.GetSecurityContext()
	switch sc.GetNamespaceOptions().GetPid() {
	case runtimeapi.NamespaceMode_NODE:
		spec.PidMode = modeHost
	case runtimeapi.NamespaceMode_CONTAINER:
		spec.PidMode = ""
	case runtimeapi.NamespaceMode_TARGET:
		spec.PidMode = modeContainer + sc.GetNamespaceOptions().GetTargetId()
	}
	if sc.GetNamespaceOptions().GetIpc() == runtimeapi.NamespaceMode_NODE {
		spec.IpcMode = modeHost
	}
	if spec.User, err = engineUser(sc.GetRunAsUser(), sc.GetRunAsUsername(), sc.GetRunAsGroup()); err != nil {
		return spec, err
	}
	spec.GroupAdd = groupAdd(sc.GetSupplementalGroups())
	spec.Privileged = sc.GetPrivileged()
	spec.ReadonlyRootfs = sc.GetReadonlyRootfs()
	for _, c := range sc.GetCapabilities().GetAddCapabilities() {
		spec.CapAdd = append(spec.CapAdd, capability(c))
	}
	for _, c := range sc.GetCapabilities().GetDropCapabilities() {
		spec.CapDrop = append(spec.CapDrop, capability(c))
	}
	if spec.SecurityOpt, err = securityOpts(sc.GetSeccomp(), sc.GetApparmor(), sc.GetSelinuxOptions(), sc.GetPrivileged()); err != nil {
		return spec, err
	}
	if sc.GetNoNewPrivs() {
		spec.SecurityOpt = append(spec.SecurityOpt, "no-new-privileges")
	}
	if !sc.GetPrivileged() {
		if sc.GetMaskedPaths() != nil {
			spec.MaskedPaths = sc.GetMaskedPaths()
		}
		if sc.GetReadonlyPaths() != nil {
			spec.ReadonlyPaths = sc.GetReadonlyPaths()
		}
	}
	return spec, nil
}

// runcShim tells whether containers of runtime ("" = the engine's default) run under
// containerd's runc shim, which groups containers by annotationShimGroup. Other
// runtimes' shims may read the annotation otherwise (gVisor's and Kata's build pods
// with it), so they do not get it.
func runcShim(info docker.Info, runtime string) bool {
	if runtime == "" {
		runtime = info.DefaultRuntime
	}
	return runtime == "runc" || runtime == "io.containerd.runc.v2"
}
