package core

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/sirupsen/logrus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// RunPodSandbox creates and starts a pod sandbox: a pause container holding the pod's
// namespaces, its checkpoint, its resolv.conf and (with CNI) its network.
func (s *Service) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	cfg := req.GetConfig()
	md := cfg.GetMetadata()
	if md.GetName() == "" || md.GetNamespace() == "" || md.GetUid() == "" {
		return nil, fmt.Errorf("pod sandbox metadata needs a name, a namespace and a uid (got %v): %w", md, cerrdefs.ErrInvalidArgument)
	}
	log := s.logger(ctx).WithField("pod", md.GetNamespace()+"/"+md.GetName())

	if err := s.ensureImage(ctx, s.cfg.SandboxImage); err != nil {
		return nil, fmt.Errorf("sandbox image %s: %w", s.cfg.SandboxImage, err)
	}
	spec, err := s.sandboxSpec(ctx, cfg, req.GetRuntimeHandler())
	if err != nil {
		return nil, err
	}
	if s.deps.NRI != nil {
		// A plugin connecting meanwhile is synchronised with the pod or told of it.
		defer s.deps.NRI.BlockSync()()
	}
	id, err := s.createContainer(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("create pod sandbox %s: %w", spec.Name, err)
	}
	if s.deps.NRI != nil {
		// Not shown to the CRI until the NRI plugins have run it.
		defer s.hide(id)()
	}
	// From here on a failure removes what was made, so that kubelet's retry starts clean.
	undo := func(cause error) error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
		defer cancel()
		errs := []error{cause}
		if !hostNetwork(cfg) && s.deps.Network != nil {
			errs = append(errs, s.tearDownNetwork(cctx, id, "", cfg.GetMetadata(), criPorts(cfg.GetPortMappings())))
		}
		errs = append(errs, ignoreNotFound(s.deps.Docker.RemoveContainer(cctx, id)), s.deps.Checkpoints.Remove(id))
		return joinErrs(errs...)
	}
	if err := timed(ctx, "checkpoint.write", func() error { return s.deps.Checkpoints.Write(id, sandboxCheckpoint(cfg)) }); err != nil {
		return nil, undo(fmt.Errorf("checkpoint pod sandbox %s: %w", id, err))
	}
	if err := s.deps.Docker.StartContainer(ctx, id); err != nil {
		return nil, undo(fmt.Errorf("start pod sandbox %s: %w", id, err))
	}
	info, err := s.deps.Docker.InspectContainer(ctx, id)
	if err != nil {
		return nil, undo(fmt.Errorf("inspect pod sandbox %s: %w", id, err))
	}
	if dns := cfg.GetDnsConfig(); len(dns.GetServers())+len(dns.GetSearches())+len(dns.GetOptions()) > 0 {
		if err := timed(ctx, "resolvconf.write", func() error { return writeResolvConf(info.ResolvConfPath, dns) }); err != nil {
			return nil, undo(err)
		}
	}
	var ips []string
	if !hostNetwork(cfg) && s.deps.Network != nil {
		res, err := s.setUpNetwork(ctx, id, info.Pid, cfg)
		if err != nil {
			return nil, undo(fmt.Errorf("set up network of pod sandbox %s: %w", id, err))
		}
		for _, ip := range res.IPs {
			ips = append(ips, ip.String())
		}
	}
	if s.deps.NRI != nil {
		pod := nriPodOfConfig(id, info.Pid, cfg, req.GetRuntimeHandler(), ips)
		if err := s.deps.NRI.RunPodSandbox(ctx, pod); err != nil {
			// The plugins before the failing one have seen the pod: they release it.
			if rerr := s.deps.NRI.RemovePodSandbox(context.WithoutCancel(ctx), pod); rerr != nil {
				log.WithError(rerr).Warn("NRI RemovePodSandbox of a pod sandbox whose run failed")
			}
			return nil, undo(nriError("RunPodSandbox", id, err))
		}
	}
	log.WithField("sandbox", id).Info("pod sandbox running")
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

// undoTimeout bounds the cleanup of a sandbox that failed half-way, which outlives
// the request (kubelet's retry must find nothing left).
const undoTimeout = time.Minute

// sandboxSpec builds the pause container of a sandbox config.
func (s *Service) sandboxSpec(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (docker.ContainerSpec, error) {
	labels := makeLabels(cfg.GetLabels(), cfg.GetAnnotations())
	labels[labelContainerType] = typeSandbox
	labels[labelContainerName] = sandboxName
	spec := docker.ContainerSpec{
		Name:        makeSandboxName(cfg.GetMetadata()),
		Image:       s.cfg.SandboxImage,
		Labels:      labels,
		OomScoreAdj: sandboxOomScoreAdj,
		IpcMode:     modeShareable,
	}
	lx := cfg.GetLinux()
	sc := lx.GetSecurityContext()
	ns := sc.GetNamespaceOptions()
	switch {
	case ns.GetNetwork() == runtimeapi.NamespaceMode_NODE:
		spec.NetworkMode = modeHost
		spec.UTSMode = modeHost
	case s.deps.Network != nil:
		spec.NetworkMode = modeNone
		spec.Hostname = cfg.GetHostname()
	default:
		spec.NetworkMode = modeDefault
		spec.Hostname = cfg.GetHostname()
		spec.PortBindings = portBindings(cfg.GetPortMappings())
	}
	if ns.GetPid() == runtimeapi.NamespaceMode_NODE {
		spec.PidMode = modeHost
	}
	if ns.GetIpc() == runtimeapi.NamespaceMode_NODE {
		spec.IpcMode = modeHost
	}
	spec.Sysctls = lx.GetSysctls()
	info, err := s.engineInfo(ctx)
	if err != nil {
		return spec, err
	}
	if spec.Runtime, err = runtimeFor(info, handler); err != nil {
		return spec, err
	}
	if spec.CgroupParent, err = cgroupParent(info.CgroupDriver, lx.GetCgroupParent()); err != nil {
		return spec, err
	}
	if spec.User, err = engineUser(sc.GetRunAsUser(), "", sc.GetRunAsGroup()); err != nil {
		return spec, err
	}
	spec.GroupAdd = groupAdd(sc.GetSupplementalGroups())
	spec.Privileged = sc.GetPrivileged()
	spec.ReadonlyRootfs = sc.GetReadonlyRootfs()
	// As upstream: the pause container runs with the engine's default seccomp profile
	// and no-new-privileges whatever the pod asks for its containers, and its share of
	// the pod's resources is fixed (the pod's limits are on the cgroup parent).
	if spec.SecurityOpt, err = securityOpts(&runtimeapi.SecurityProfile{}, sc.GetApparmor(), sc.GetSelinuxOptions(), sc.GetPrivileged()); err != nil {
		return spec, err
	}
	spec.SecurityOpt = append(spec.SecurityOpt, "no-new-privileges")
	spec.Resources.CPUShares = sandboxCPUShares
	return spec, nil
}

// createContainer creates spec. On a name conflict it behaves as upstream cri-dockerd,
// so that kubelet sees the same outcome whichever binary runs the node: a conflicting
// container that is not running (left by a crash, or by a create whose answer was
// lost) is removed and the conflict returned, and kubelet's retry creates the
// container under its plain name; a running one (or one that cannot be removed) only
// fails the create; only when the conflicting container is already gone is spec
// created under the name with upstream's random suffix.
func (s *Service) createContainer(ctx context.Context, spec docker.ContainerSpec) (string, error) {
	id, err := s.deps.Docker.CreateContainer(ctx, spec)
	if !cerrdefs.IsAlreadyExists(err) {
		return id, err
	}
	log := s.logger(ctx).WithField("name", spec.Name)
	conflict, ierr := s.deps.Docker.InspectContainer(ctx, spec.Name)
	switch {
	case cerrdefs.IsNotFound(ierr):
		// Gone since the create: the engine may still hold the name for a moment.
	case ierr != nil:
		log.WithError(ierr).Warn("container name in use, and the container holding it cannot be inspected")
		return "", err
	case conflict.State == docker.StateRunning || conflict.State == docker.StatePaused || conflict.State == docker.StateRestarting:
		// Upstream removes without force, which the engine refuses for these.
		log.WithFields(logrus.Fields{"container": conflict.ID, "state": conflict.State}).Warn("container name in use by a live container")
		return "", err
	default:
		rerr := s.deps.Docker.RemoveContainer(ctx, conflict.ID)
		if rerr == nil {
			log.WithField("container", conflict.ID).Info("container name was in use: removed the non-running container holding it, the retry can create it")
			return "", fmt.Errorf("%w (the non-running container %s holding the name was removed: retry)", err, conflict.ID)
		}
		if !cerrdefs.IsNotFound(rerr) {
			log.WithError(rerr).WithField("container", conflict.ID).Warn("container name in use, and the container holding it cannot be removed")
			return "", err
		}
	}
	spec.Name = withRandomSuffix(spec.Name)
	log.WithField("random_name", spec.Name).Warn("container name held by a container that is gone, creating with a random suffix")
	return s.deps.Docker.CreateContainer(ctx, spec)
}

// ensureImage pulls ref unless the engine has it, with the node's credentials for its
// registry (DefaultCredentialFiles), as upstream pulls the sandbox image.
func (s *Service) ensureImage(ctx context.Context, ref string) error {
	_, err := s.deps.Docker.InspectImage(ctx, ref)
	if !cerrdefs.IsNotFound(err) {
		return err
	}
	auth, err := nodeCredentials(s.cfg.CredentialFiles, ref)
	if err != nil {
		// A broken credentials file must not stop a pull that may not need it.
		s.logger(ctx).WithError(err).Warn("ignoring the node's registry credentials")
	}
	s.logger(ctx).WithField("image", ref).WithField("credentials", auth != nil).Info("pulling missing image")
	return s.deps.Docker.PullImage(ctx, ref, docker.PullOptions{Auth: auth, ProgressDeadline: s.cfg.ImagePullProgressDeadline})
}

// portBindings publishes the host ports of port mappings on Docker's bridge network.
// A mapping without a host port only declares a container port: publishing it would
// open a random host port to the world, so it is not published (as upstream).
func portBindings(pms []*runtimeapi.PortMapping) []docker.PortBinding {
	var out []docker.PortBinding
	for _, pm := range pms {
		if pm.GetHostPort() <= 0 {
			continue
		}
		out = append(out, docker.PortBinding{
			Protocol:      protocolName(pm.GetProtocol()),
			ContainerPort: int(pm.GetContainerPort()),
			HostIP:        pm.GetHostIp(),
			HostPort:      int(pm.GetHostPort()),
		})
	}
	return out
}

// writeResolvConf replaces the sandbox's resolv.conf with the pod's DNS config; the
// pod's containers share the file through the sandbox's network namespace.
func writeResolvConf(path string, dns *runtimeapi.DNSConfig) error {
	if path == "" {
		return fmt.Errorf("pod sandbox has no resolv.conf to write the DNS config to: %w", cerrdefs.ErrFailedPrecondition)
	}
	var b strings.Builder // upstream's order: nameservers, search, options
	for _, srv := range dns.GetServers() {
		b.WriteString("nameserver " + srv + "\n")
	}
	if len(dns.GetSearches()) > 0 {
		b.WriteString("search " + strings.Join(dns.GetSearches(), " ") + "\n")
	}
	if len(dns.GetOptions()) > 0 {
		b.WriteString("options " + strings.Join(dns.GetOptions(), " ") + "\n")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write resolv.conf of pod sandbox: %w", err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil { // resolv.conf is world-readable
		return fmt.Errorf("write resolv.conf of pod sandbox: %w", err)
	}
	return nil
}

// runtimeFor maps a CRI runtime handler onto the engine's OCI runtime: "" and
// "docker" are the engine's default; any other must be one the engine is configured
// with (RuntimeClass pods: nvidia, runsc, ...).
func runtimeFor(info docker.Info, handler string) (string, error) {
	switch {
	case handler == "" || handler == RuntimeName:
		return "", nil
	case slices.Contains(info.Runtimes, handler):
		return handler, nil
	}
	return "", fmt.Errorf("runtime handler %q is not a runtime of the engine (it has %s): %w",
		handler, strings.Join(info.Runtimes, ", "), cerrdefs.ErrInvalidArgument)
}
