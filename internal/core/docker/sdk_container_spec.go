package docker

import (
	"maps"
	"os"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/go-connections/nat"
)

// sdkContainerConfig maps spec one to one onto the engine's container and host config.
func sdkContainerConfig(spec ContainerSpec) (*container.Config, *container.HostConfig) {
	cfg := &container.Config{
		Hostname:   spec.Hostname,
		Domainname: spec.Domainname,
		User:       spec.User,
		Tty:        spec.Tty,
		OpenStdin:  spec.OpenStdin,
		StdinOnce:  spec.StdinOnce,
		Env:        spec.Env,
		Cmd:        spec.Cmd,
		Image:      spec.Image,
		WorkingDir: spec.WorkingDir,
		Entrypoint: spec.Entrypoint,
		Labels:     spec.Labels,
		StopSignal: spec.StopSignal,
	}
	if spec.NoHealthcheck {
		cfg.Healthcheck = &container.HealthConfig{Test: []string{"NONE"}}
	}
	hostCfg := &container.HostConfig{
		Binds:          sdkBinds(spec.Mounts),
		NetworkMode:    container.NetworkMode(spec.NetworkMode),
		CapAdd:         spec.CapAdd,
		CapDrop:        spec.CapDrop,
		DNS:            spec.DNS,
		DNSOptions:     spec.DNSOptions,
		DNSSearch:      spec.DNSSearch,
		ExtraHosts:     spec.ExtraHosts,
		GroupAdd:       spec.GroupAdd,
		IpcMode:        container.IpcMode(spec.IpcMode),
		OomScoreAdj:    spec.OomScoreAdj,
		PidMode:        container.PidMode(spec.PidMode),
		Privileged:     spec.Privileged,
		ReadonlyRootfs: spec.ReadonlyRootfs,
		SecurityOpt:    spec.SecurityOpt,
		UTSMode:        container.UTSMode(spec.UTSMode),
		Runtime:        spec.Runtime,
		ShmSize:        spec.ShmSize,
		Sysctls:        spec.Sysctls,
		Resources:      sdkResources(spec.Resources),
		// A nil slice leaves the engine's defaults; a non-nil one (even empty) replaces them.
		MaskedPaths:   spec.MaskedPaths,
		ReadonlyPaths: spec.ReadonlyPaths,
	}
	hostCfg.CgroupParent = spec.CgroupParent
	if lc := spec.LogConfig; lc != nil {
		hostCfg.LogConfig = container.LogConfig{Type: lc.Type, Config: maps.Clone(lc.Config)}
	}
	for _, d := range spec.Devices {
		hostCfg.Devices = append(hostCfg.Devices, container.DeviceMapping{
			PathOnHost:        d.PathOnHost,
			PathInContainer:   d.PathInContainer,
			CgroupPermissions: d.CgroupPermissions,
		})
	}
	if len(spec.CDIDevices) > 0 {
		hostCfg.DeviceRequests = append(hostCfg.DeviceRequests, container.DeviceRequest{Driver: "cdi", DeviceIDs: spec.CDIDevices})
	}
	if len(spec.PortBindings) > 0 {
		cfg.ExposedPorts = nat.PortSet{}
		hostCfg.PortBindings = nat.PortMap{}
		for _, pb := range spec.PortBindings {
			proto := pb.Protocol
			if proto == "" {
				proto = "tcp"
			}
			port := nat.Port(strconv.Itoa(pb.ContainerPort) + "/" + strings.ToLower(proto))
			cfg.ExposedPorts[port] = struct{}{}
			hostPort := ""
			if pb.HostPort != 0 {
				hostPort = strconv.Itoa(pb.HostPort)
			}
			hostCfg.PortBindings[port] = append(hostCfg.PortBindings[port], nat.PortBinding{HostIP: pb.HostIP, HostPort: hostPort})
		}
	}
	return cfg, hostCfg
}

// sdkBinds renders mounts in the engine's bind syntax "source:target[:options]",
// the one form that carries SELinux relabelling as well as propagation.
func sdkBinds(mounts []Mount) []string {
	var binds []string
	for _, m := range mounts {
		var opts []string
		if m.ReadOnly {
			opts = append(opts, "ro")
		}
		if m.SELinuxRelabel {
			opts = append(opts, "Z")
		}
		if m.Propagation != "" {
			opts = append(opts, m.Propagation)
		}
		b := m.Source + ":" + m.Target
		if len(opts) > 0 {
			b += ":" + strings.Join(opts, ",")
		}
		binds = append(binds, b)
	}
	return binds
}

// sdkBindsAndMounts is sdkBinds, except that read-only mounts become mounts of the
// mount API, with recursive read-only set as asked (API 1.44 and later) — unless they
// ask for SELinux relabelling on a host with SELinux, which only the bind syntax carries.
func sdkBindsAndMounts(mounts []Mount, selinux bool) ([]string, []mount.Mount) {
	var binds []Mount
	var out []mount.Mount
	for _, m := range mounts {
		if !m.ReadOnly || (m.SELinuxRelabel && selinux) {
			binds = append(binds, m)
			continue
		}
		out = append(out, mount.Mount{
			Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: true,
			BindOptions: &mount.BindOptions{
				Propagation:            mount.Propagation(m.Propagation),
				ReadOnlyNonRecursive:   !m.RecursiveReadOnly,
				ReadOnlyForceRecursive: m.RecursiveReadOnly,
			},
		})
	}
	return sdkBinds(binds), out
}

// sdkImageMounts maps image volumes onto the engine's read-only image mounts.
func sdkImageMounts(mounts []ImageMount) []mount.Mount {
	var out []mount.Mount
	for _, m := range mounts {
		im := mount.Mount{Type: mount.TypeImage, Source: m.Image, Target: m.Target, ReadOnly: true}
		if m.SubPath != "" {
			im.ImageOptions = &mount.ImageOptions{Subpath: m.SubPath}
		}
		out = append(out, im)
	}
	return out
}

// imageMountsFromSDK is the inverse of sdkImageMounts, over an inspected container's host config.
func imageMountsFromSDK(h *container.HostConfig) []ImageMount {
	if h == nil {
		return nil
	}
	var out []ImageMount
	for _, m := range h.Mounts {
		if m.Type != mount.TypeImage {
			continue
		}
		im := ImageMount{Image: m.Source, Target: m.Target}
		if m.ImageOptions != nil {
			im.SubPath = m.ImageOptions.Subpath
		}
		out = append(out, im)
	}
	return out
}

// selinuxEnabled tells whether SELinux is on for this host (which the engine shares:
// cri-dockerd runs next to it). Without it relabelling is a no-op.
func selinuxEnabled() bool {
	_, err := os.Stat("/sys/fs/selinux/enforce")
	return err == nil
}

// sdkResources maps r onto the engine's resources. The engine has no equivalent of
// cgroup v2 Unified key/values, so r.Unified is not sent.
func sdkResources(r Resources) container.Resources {
	out := container.Resources{
		CPUShares:  r.CPUShares,
		CPUPeriod:  r.CPUPeriod,
		CPUQuota:   r.CPUQuota,
		CpusetCpus: r.CpusetCpus,
		CpusetMems: r.CpusetMems,
		Memory:     r.MemoryLimit,
		MemorySwap: r.MemorySwap,
	}
	if r.PidsLimit != 0 {
		limit := r.PidsLimit
		out.PidsLimit = &limit
	}
	for _, u := range r.Ulimits {
		out.Ulimits = append(out.Ulimits, &container.Ulimit{Name: u.Name, Soft: u.Soft, Hard: u.Hard})
	}
	return out
}

// resourcesFromSDK is the inverse of sdkResources.
func resourcesFromSDK(r container.Resources) Resources {
	out := Resources{
		CPUShares:   r.CPUShares,
		CPUPeriod:   r.CPUPeriod,
		CPUQuota:    r.CPUQuota,
		CpusetCpus:  r.CpusetCpus,
		CpusetMems:  r.CpusetMems,
		MemoryLimit: r.Memory,
		MemorySwap:  r.MemorySwap,
	}
	if r.PidsLimit != nil && *r.PidsLimit > 0 {
		out.PidsLimit = *r.PidsLimit
	}
	for _, u := range r.Ulimits {
		if u != nil {
			out.Ulimits = append(out.Ulimits, Ulimit{Name: u.Name, Soft: u.Soft, Hard: u.Hard})
		}
	}
	return out
}
