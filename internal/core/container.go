package core

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// containerInspect returns container id, NotFound when there is none or it is a sandbox.
func (s *Service) containerInspect(ctx context.Context, id string) (docker.ContainerDetails, error) {
	return s.inspectTyped(ctx, id, typeContainer, "container", "kubernetes container")
}

// containerWithMetadata returns container id (see containerInspect) and its CRI
// metadata, read from its name.
func (s *Service) containerWithMetadata(ctx context.Context, id string) (docker.ContainerDetails, *runtimeapi.ContainerMetadata, error) {
	c, err := s.containerInspect(ctx, id)
	if err != nil {
		return c, nil, err
	}
	md, err := containerMetadata(c.Container)
	return c, md, err
}

// inspectTyped returns engine container id when its type label is typ, NotFound when
// there is none or it is of another type; what names the CRI object in errors and
// typeName the type.
func (s *Service) inspectTyped(ctx context.Context, id, typ, what, typeName string) (docker.ContainerDetails, error) {
	if id == "" {
		return docker.ContainerDetails{}, fmt.Errorf("%s id is empty: %w", what, cerrdefs.ErrInvalidArgument)
	}
	c, err := s.deps.Docker.InspectContainer(ctx, id)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return c, fmt.Errorf("%s %q not found: %w", what, id, cerrdefs.ErrNotFound)
		}
		return c, err
	}
	if c.Labels[labelContainerType] != typ {
		return c, fmt.Errorf("%s %q not found (container %s is not a %s): %w", what, id, c.ID, typeName, cerrdefs.ErrNotFound)
	}
	return c, nil
}

// containerMetadata rebuilds a container's CRI metadata from its engine name.
func containerMetadata(c docker.Container) (*runtimeapi.ContainerMetadata, error) {
	n, err := parseName(c.Name)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerMetadata{Name: n.container, Attempt: n.attempt}, nil
}

// stateOfContainer maps the engine state to the CRI's.
func stateOfContainer(state string) runtimeapi.ContainerState {
	switch state {
	case docker.StateCreated:
		return runtimeapi.ContainerState_CONTAINER_CREATED
	case docker.StateRunning, docker.StatePaused, docker.StateRestarting:
		return runtimeapi.ContainerState_CONTAINER_RUNNING
	case docker.StateExited, docker.StateDead:
		return runtimeapi.ContainerState_CONTAINER_EXITED
	}
	return runtimeapi.ContainerState_CONTAINER_UNKNOWN
}

// isCDIName tells whether s is a fully qualified CDI device name, "vendor.com/class=name":
// kubelet passes those in cdi_devices, and device plugins also among the devices' host paths.
// The engine resolves the name; this only tells it from a path.
func isCDIName(s string) bool {
	kind, name, ok := strings.Cut(s, "=")
	if !ok || name == "" || strings.ContainsAny(name, "/=") {
		return false
	}
	vendor, class, ok := strings.Cut(kind, "/")
	return ok && vendor != "" && class != "" && !strings.Contains(class, "/")
}

// criResources maps engine resources back for ContainerStatus.
func criResources(r docker.Resources) *runtimeapi.ContainerResources {
	return &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{
		CpuShares: r.CPUShares, CpuPeriod: r.CPUPeriod, CpuQuota: r.CPUQuota,
		CpusetCpus: r.CpusetCpus, CpusetMems: r.CpusetMems,
		MemoryLimitInBytes: r.MemoryLimit, MemorySwapLimitInBytes: r.MemorySwap, Unified: r.Unified,
	}}
}

// propagation maps CRI mount propagation to the engine's.
var propagation = map[runtimeapi.MountPropagation]string{
	runtimeapi.MountPropagation_PROPAGATION_PRIVATE:           "",
	runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER: "rslave",
	runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL:     "rshared",
}

// criPropagation maps the engine's mount propagation back.
func criPropagation(p string) runtimeapi.MountPropagation {
	switch p {
	case "rslave", "slave":
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
	case "rshared", "shared":
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
	}
	return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
}

// nanos returns t in Unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// capability returns an engine capability name ("NET_ADMIN", "ALL").
func capability(c string) string {
	c = strings.ToUpper(c)
	if c == "ALL" {
		return c
	}
	return strings.TrimPrefix(c, "CAP_")
}

// containerDevices splits a container's devices into host devices and CDI devices
// (cdi_devices, and CDI names among devices), the latter checked by checkCDIDevices.
func (s *Service) containerDevices(ctx context.Context, cfg *runtimeapi.ContainerConfig) ([]docker.Device, []string, error) {
	var devices []docker.Device
	var cdi []string
	for _, d := range cfg.GetCDIDevices() {
		if !isCDIName(d.GetName()) {
			return nil, nil, fmt.Errorf("cdi_devices: %q is not a fully qualified CDI device name (vendor.com/class=name): %w", d.GetName(), cerrdefs.ErrInvalidArgument)
		}
		cdi = append(cdi, d.GetName())
	}
	for _, d := range cfg.GetDevices() {
		if isCDIName(d.GetHostPath()) {
			cdi = append(cdi, d.GetHostPath())
			continue
		}
		devices = append(devices, docker.Device{
			PathOnHost: d.GetHostPath(), PathInContainer: d.GetContainerPath(), CgroupPermissions: d.GetPermissions(),
		})
	}
	if len(cdi) > 0 {
		if err := s.checkCDIDevices(ctx, cdi); err != nil {
			return nil, nil, err
		}
	}
	return devices, cdi, nil
}

// checkCDIDevices refuses, at creation, CDI devices the engine could not inject when the
// container starts: with CDI off (FailedPrecondition) or not among the devices the engine
// discovered in its spec directories (NotFound). Engines before API 1.50 do not report
// their devices; they fail such a container when it starts. Info is asked afresh, as
// spec files come and go.
func (s *Service) checkCDIDevices(ctx context.Context, names []string) error {
	info, err := s.deps.Docker.Info(ctx)
	if err != nil {
		return err
	}
	if !info.CDIDevicesReported {
		return nil
	}
	if len(info.CDISpecDirs) == 0 {
		return fmt.Errorf("CDI devices %q: the engine has CDI off (no CDI spec directories): %w", names, cerrdefs.ErrFailedPrecondition)
	}
	var unknown []string
	for _, n := range names {
		if !slices.Contains(info.CDIDevices, n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("unresolvable CDI devices %q: not among the devices the engine found in its CDI spec directories %q: %w",
			unknown, info.CDISpecDirs, cerrdefs.ErrNotFound)
	}
	return nil
}
