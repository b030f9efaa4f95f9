package docker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/versions"
)

// CreateContainer creates a container from spec and returns its ID.
func (c *SDKClient) CreateContainer(ctx context.Context, spec ContainerSpec) (string, error) {
	op := "create container " + spec.Name
	cfg, hostCfg := sdkContainerConfig(spec)
	if !versions.LessThan(c.api.ClientVersion(), "1.44") {
		// Since API 1.44 "ro" binds are recursively read-only; the CRI's read-only mount
		// is not unless it asks (RecursiveReadOnly), which needs the mount API's options.
		hostCfg.Binds, hostCfg.Mounts = sdkBindsAndMounts(spec.Mounts, selinuxEnabled())
	}
	hostCfg.Mounts = append(hostCfg.Mounts, sdkImageMounts(spec.ImageMounts)...)
	if len(spec.Annotations) > 0 && !versions.LessThan(c.api.ClientVersion(), "1.43") {
		hostCfg.Annotations = spec.Annotations // OCI annotations, since API 1.43 (Docker 24)
	}
	resp, err := c.api.ContainerCreate(ctx, cfg, hostCfg, nil, nil, spec.Name)
	if err != nil {
		if cerrdefs.IsConflict(err) {
			// The engine answers 409 for a name in use; for the CRI that is AlreadyExists.
			return "", classifyAs(op, err, cerrdefs.ErrAlreadyExists)
		}
		return "", classify(op, err)
	}
	return resp.ID, nil
}

// StartContainer starts a created or stopped container.
func (c *SDKClient) StartContainer(ctx context.Context, id string) error {
	return classify("start container "+id, c.api.ContainerStart(ctx, id, container.StartOptions{}))
}

// StopContainer stops a container, killing it after timeout (rounded up to whole
// seconds). The engine answers 304 for a stopped container, which is success.
func (c *SDKClient) StopContainer(ctx context.Context, id string, timeout time.Duration) error {
	secs := stopTimeoutSeconds(timeout)
	return classify("stop container "+id, c.api.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs}))
}

func stopTimeoutSeconds(timeout time.Duration) int {
	if timeout <= 0 {
		return 0
	}
	return int((timeout + time.Second - 1) / time.Second)
}

// RemoveContainer removes a container, running or not, with its anonymous volumes.
func (c *SDKClient) RemoveContainer(ctx context.Context, id string) error {
	err := c.api.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	return classify("remove container "+id, err)
}

// PathExists stats path in a container's filesystem (HEAD /containers/{id}/archive).
func (c *SDKClient) PathExists(ctx context.Context, id, path string) (bool, error) {
	if _, err := c.api.ContainerStatPath(ctx, id, path); err != nil {
		if _, ierr := c.api.ContainerInspect(ctx, id); ierr != nil {
			return false, classify("stat "+path+" in container "+id, ierr)
		}
		if cerrdefs.IsNotFound(classify("", err)) {
			return false, nil
		}
		return false, classify("stat "+path+" in container "+id, err)
	}
	return true, nil
}

// ListContainers lists the containers filter selects.
func (c *SDKClient) ListContainers(ctx context.Context, filter ContainerFilter) ([]Container, error) {
	args := filters.NewArgs()
	if filter.ID != "" {
		args.Add("id", filter.ID)
	}
	for k, v := range filter.Labels {
		args.Add("label", k+"="+v)
	}
	list, err := c.api.ContainerList(ctx, container.ListOptions{All: !filter.Running, Size: filter.Size, Filters: args})
	if err != nil {
		return nil, classify("list containers", err)
	}
	out := make([]Container, 0, len(list))
	for i := range list {
		s := &list[i]
		name := ""
		if len(s.Names) > 0 {
			name = strings.TrimPrefix(s.Names[0], "/")
		}
		out = append(out, Container{
			ID:      s.ID,
			Name:    name,
			Image:   s.Image,
			ImageID: s.ImageID,
			Labels:  s.Labels,
			State:   string(s.State),
			Created: time.Unix(s.Created, 0),
		})
		if filter.Size {
			out[len(out)-1].SizeRw = s.SizeRw
		}
	}
	return out, nil
}

// InspectContainer returns what the engine knows about a container.
func (c *SDKClient) InspectContainer(ctx context.Context, id string) (ContainerDetails, error) {
	in, err := c.api.ContainerInspect(ctx, id)
	if err != nil {
		return ContainerDetails{}, classify("inspect container "+id, err)
	}
	return detailsFromSDK(in), nil
}

func detailsFromSDK(in container.InspectResponse) ContainerDetails {
	var d ContainerDetails
	if b := in.ContainerJSONBase; b != nil {
		d.ID = b.ID
		d.Name = strings.TrimPrefix(b.Name, "/")
		d.ImageID = b.Image
		d.Created = parseEngineTime(b.Created)
		d.ResolvConfPath = b.ResolvConfPath
		d.HostnamePath = b.HostnamePath
		d.HostsPath = b.HostsPath
		d.LogPath = b.LogPath
		d.UpperDir = b.GraphDriver.Data["UpperDir"]
		if s := b.State; s != nil {
			d.State = string(s.Status)
			d.Pid = s.Pid
			d.ExitCode = s.ExitCode
			d.Error = s.Error
			d.OOMKilled = s.OOMKilled
			d.StartedAt = parseEngineTime(s.StartedAt)
			d.FinishedAt = parseEngineTime(s.FinishedAt)
		}
		if h := b.HostConfig; h != nil {
			d.NetworkMode = string(h.NetworkMode)
			d.PidMode = string(h.PidMode)
			d.IpcMode = string(h.IpcMode)
			d.Runtime = h.Runtime
			d.Resources = resourcesFromSDK(h.Resources)
		}
	}
	if cfg := in.Config; cfg != nil {
		d.Image = cfg.Image
		d.Labels = cfg.Labels
		d.Hostname = cfg.Hostname
		d.User = cfg.User
		d.Env = cfg.Env
		d.Entrypoint = cfg.Entrypoint
		d.Cmd = cfg.Cmd
	}
	d.IPAddress, d.IPv6Address = containerAddresses(in.NetworkSettings)
	if in.ContainerJSONBase != nil {
		d.ImageMounts = imageMountsFromSDK(in.HostConfig)
	}
	for _, m := range in.Mounts {
		if m.Type == mount.TypeImage {
			continue // in ImageMounts, as asked for
		}
		d.Mounts = append(d.Mounts, Mount{
			Source:         m.Source,
			Target:         m.Destination,
			ReadOnly:       !m.RW,
			Propagation:    string(m.Propagation),
			SELinuxRelabel: slices.Contains(strings.Split(m.Mode, ","), "Z"),
		})
	}
	return d
}

// containerAddresses returns the container's addresses on the engine's default
// bridge network, or else on the first of its networks by name.
func containerAddresses(ns *container.NetworkSettings) (ipv4, ipv6 string) {
	if ns == nil || len(ns.Networks) == 0 {
		return "", ""
	}
	name := "bridge"
	if ns.Networks[name] == nil {
		names := make([]string, 0, len(ns.Networks))
		for n, ep := range ns.Networks {
			if ep != nil {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			return "", ""
		}
		slices.Sort(names)
		name = names[0]
	}
	ep := ns.Networks[name]
	return ep.IPAddress, ep.GlobalIPv6Address
}

// parseEngineTime parses an engine timestamp; the engine's "never"
// (0001-01-01T00:00:00Z), an empty or a malformed one give the zero time.
func parseEngineTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.IsZero() {
		return time.Time{}
	}
	return t
}

// UpdateContainerResources changes a running container's cgroup limits.
func (c *SDKClient) UpdateContainerResources(ctx context.Context, id string, r Resources) error {
	_, err := c.api.ContainerUpdate(ctx, id, container.UpdateConfig{Resources: sdkResources(r)})
	return classify("update container resources "+id, err)
}

// ContainerLogs copies a container's log, each line prefixed with its timestamp,
// to opts' writers.
func (c *SDKClient) ContainerLogs(ctx context.Context, id string, opts LogsOptions) error {
	op := "container logs " + id
	in, err := c.api.ContainerInspect(ctx, id)
	if err != nil {
		return classify(op, err)
	}
	tty := in.Config != nil && in.Config.Tty
	logOpts := container.LogsOptions{ShowStdout: true, ShowStderr: true, Timestamps: true, Follow: opts.Follow}
	if opts.Since.After(time.Unix(0, 0)) {
		logOpts.Since = fmt.Sprintf("%d.%09d", opts.Since.Unix(), opts.Since.Nanosecond())
	}
	body, err := c.api.ContainerLogs(ctx, id, logOpts)
	if err != nil {
		return classify(op, err)
	}
	defer body.Close()
	if err := copyStreams(body, tty, opts.Stdout, opts.Stderr); err != nil {
		return classify(op, err)
	}
	return nil
}
