package dockertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// fakeContainer is one container of the fake engine.
type fakeContainer struct {
	seq     int // creation order
	spec    docker.ContainerSpec
	details docker.ContainerDetails
	logs    []logLine
	stats   *docker.ContainerStats
	// sizeRw is the writable layer's size, set by SetWritableSize.
	sizeRw int64
	// resizes are the TTY sizes applied to the main process (Attach) and its execs.
	resizes []docker.TerminalSize
	// stdin is what the main process read from attached stdins.
	stdin strings.Builder
	// logBreak, when set, breaks the next ContainerLogs call (BreakLogs).
	logBreak *logBreak
	// changes are its writable layer's changes (SetChanges).
	changes []docker.FileChange
}

// CreateContainer implements docker.Client: the image must exist and the name be free.
func (f *Fake) CreateContainer(ctx context.Context, spec docker.ContainerSpec) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(ctx, "CreateContainer"); err != nil {
		return "", err
	}
	name := strings.TrimPrefix(spec.Name, "/")
	if name == "" {
		name = fmt.Sprintf("fake_container_%d", f.containerSeq+1)
	}
	for _, c := range f.containers {
		if c.details.Name == name {
			return "", fmt.Errorf("create container %s: the container name %q is already in use by container %s: %w",
				name, "/"+name, c.details.ID, cerrdefs.ErrAlreadyExists)
		}
	}
	img := f.lookup(spec.Image)
	if img == nil {
		return "", fmt.Errorf("create container %s: no such image: %s: %w", name, spec.Image, cerrdefs.ErrNotFound)
	}
	for _, m := range spec.ImageMounts {
		if f.lookup(m.Image) == nil {
			return "", fmt.Errorf("create container %s: image mount %s: no such image: %s: %w", name, m.Target, m.Image, cerrdefs.ErrNotFound)
		}
	}
	f.containerSeq++
	sum := sha256.Sum256([]byte("container-" + strconv.Itoa(f.containerSeq)))
	id := hex.EncodeToString(sum[:])
	spec = cloneSpec(spec)
	spec.Name = name
	hostname := spec.Hostname
	if hostname == "" {
		hostname = id[:12]
	}
	dir := path.Join(f.info.DockerRootDir, "containers", id)
	f.containers[id] = &fakeContainer{
		seq:  f.containerSeq,
		spec: spec,
		details: docker.ContainerDetails{
			Container: docker.Container{
				ID:      id,
				Name:    name,
				Image:   spec.Image,
				ImageID: img.ID,
				Labels:  spec.Labels,
				State:   docker.StateCreated,
				Created: time.Now(),
			},
			Hostname:       hostname,
			User:           spec.User,
			Env:            spec.Env,
			Entrypoint:     spec.Entrypoint,
			Cmd:            spec.Cmd,
			NetworkMode:    spec.NetworkMode,
			PidMode:        spec.PidMode,
			Runtime:        spec.Runtime,
			IpcMode:        spec.IpcMode,
			ResolvConfPath: path.Join(dir, "resolv.conf"),
			HostnamePath:   path.Join(dir, "hostname"),
			HostsPath:      path.Join(dir, "hosts"),
			LogPath:        path.Join(dir, id+"-json.log"),
			Mounts:         spec.Mounts,
			ImageMounts:    spec.ImageMounts,
			Resources:      spec.Resources,
		},
	}
	f.publishContainer("create", id)
	f.notify()
	return id, nil
}

// StartContainer implements docker.Client: a created or stopped container runs;
// starting a running one is a no-op.
func (f *Fake) StartContainer(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.checkedContainer(ctx, "StartContainer", "start container", id)
	if err != nil {
		return err
	}
	if c.details.State != docker.StateRunning {
		f.setRunning(c)
		c.details.ExitCode = 0
		c.details.Error = ""
		c.details.OOMKilled = false
		f.publishContainer("start", c.details.ID)
		f.notify()
	}
	return nil
}

// setRunning marks c running with a fresh pid and, on the bridge network, an address.
func (f *Fake) setRunning(c *fakeContainer) {
	f.pidSeq++
	d := &c.details
	d.State = docker.StateRunning
	d.Pid = 10000 + f.pidSeq
	d.StartedAt = time.Now()
	switch c.spec.NetworkMode {
	case "", "default", "bridge":
		n := c.seq - 1 // the first container gets 172.17.0.2, after the gateway
		d.IPAddress = fmt.Sprintf("172.17.%d.%d", n/253, n%253+2)
	}
}

// setStopped marks c as state (exited or dead) with its process gone.
func setStopped(c *fakeContainer, state string) {
	d := &c.details
	d.State = state
	d.Pid = 0
	d.FinishedAt = time.Now()
	d.IPAddress = ""
	d.IPv6Address = ""
}

// StopContainer implements docker.Client: a running container exits with its exit
// code (0 unless set with SetContainerState); stopping any other succeeds.
func (f *Fake) StopContainer(ctx context.Context, id string, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.checkedContainer(ctx, "StopContainer", "stop container", id)
	if err != nil {
		return err
	}
	switch c.details.State {
	case docker.StateRunning, docker.StatePaused, docker.StateRestarting:
		setStopped(c, docker.StateExited)
		f.publishExit(c.details.ID)
		f.publishContainer("die", c.details.ID)
		f.notify()
	}
	return nil
}

// RemoveContainer implements docker.Client.
func (f *Fake) RemoveContainer(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.checkedContainer(ctx, "RemoveContainer", "remove container", id)
	if err != nil {
		return err
	}
	delete(f.containers, c.details.ID)
	f.publishContainer("destroy", c.details.ID)
	f.notify()
	return nil
}

// SetImageFiles gives the image ref resolves to the files paths (absolute, cleaned)
// that PathExists finds in its containers; their parent directories exist too.
func (f *Fake) SetImageFiles(ref string, paths ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	img := f.lookup(ref)
	if img == nil {
		panic("dockertest: SetImageFiles of an unknown image " + ref)
	}
	if f.imageFiles == nil {
		f.imageFiles = map[string][]string{}
	}
	f.imageFiles[img.ID] = paths
}

// PathExists implements docker.Client: path is "/", one of the files SetImageFiles
// gave the container's image, or a directory above one.
func (f *Fake) PathExists(ctx context.Context, id, p string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.checkedContainer(ctx, "PathExists", "stat "+p+" in container", id)
	if err != nil {
		return false, err
	}
	p = path.Clean("/" + p)
	img := f.lookup(c.spec.Image)
	if p == "/" {
		return true, nil
	}
	if img == nil {
		return false, nil
	}
	for _, file := range f.imageFiles[img.ID] {
		if file == p || strings.HasPrefix(file, p+"/") {
			return true, nil
		}
	}
	return false, nil
}

// ListContainers implements docker.Client; the newest container comes first, as
// the engine lists them.
func (f *Fake) ListContainers(ctx context.Context, filter docker.ContainerFilter) ([]docker.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(ctx, "ListContainers"); err != nil {
		return nil, err
	}
	var sel []*fakeContainer
	for _, c := range f.containers {
		d := &c.details
		if filter.Running && d.State != docker.StateRunning {
			continue
		}
		if filter.ID != "" && !strings.HasPrefix(d.ID, filter.ID) {
			continue
		}
		if !hasLabels(d.Labels, filter.Labels) {
			continue
		}
		sel = append(sel, c)
	}
	slices.SortFunc(sel, func(a, b *fakeContainer) int { return b.seq - a.seq })
	out := make([]docker.Container, 0, len(sel))
	for _, c := range sel {
		lc := cloneDetails(c.details).Container
		if filter.Size {
			lc.SizeRw = c.sizeRw
		}
		out = append(out, lc)
	}
	return out, nil
}

func hasLabels(labels, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// InspectContainer implements docker.Client.
func (f *Fake) InspectContainer(ctx context.Context, id string) (docker.ContainerDetails, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.checkedContainer(ctx, "InspectContainer", "inspect container", id)
	if err != nil {
		return docker.ContainerDetails{}, err
	}
	return cloneDetails(c.details), nil
}

// UpdateContainerResources implements docker.Client; InspectContainer shows the new resources.
func (f *Fake) UpdateContainerResources(ctx context.Context, id string, r docker.Resources) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.checkedContainer(ctx, "UpdateContainerResources", "update container resources", id)
	if err != nil {
		return err
	}
	c.details.Resources = cloneResources(r)
	c.spec.Resources = cloneResources(r)
	return nil
}

// SetWritableSize sets the size of container id's writable layer, which
// ListContainers reports with ContainerFilter.Size.
func (f *Fake) SetWritableSize(id string, n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.container(id); c != nil {
		c.sizeRw = n
	}
}

// Spec returns the spec container id was created with (resources as last updated).
func (f *Fake) Spec(id string) (docker.ContainerSpec, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.container(id)
	if c == nil {
		return docker.ContainerSpec{}, false
	}
	return cloneSpec(c.spec), true
}

// ContainerIDs returns the IDs of all containers, sorted.
func (f *Fake) ContainerIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.containers))
}

// SetContainerState changes a container's state and exit code behind the shim's
// back, as a crash or an operator would: "running" gives it a process, any other
// state takes it away ("exited" and "dead" also set FinishedAt). It does nothing
// when there is no such container.
func (f *Fake) SetContainerState(id, state string, exitCode int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.container(id)
	if c == nil {
		return
	}
	switch state {
	case docker.StateRunning:
		if c.details.State != docker.StateRunning {
			f.setRunning(c)
			f.publishContainer("start", c.details.ID)
		}
	case docker.StateExited, docker.StateDead:
		setStopped(c, state)
		f.publishExit(c.details.ID)
		f.publishContainer("die", c.details.ID)
	default:
		f.publishContainer(state, c.details.ID)
		c.details.State = state
		if state != docker.StatePaused && state != docker.StateRestarting {
			c.details.Pid = 0
		}
	}
	c.details.ExitCode = exitCode
	f.notify()
}

// SetPid makes pid the host process of running container id's main process, for
// tests that need a real process there (the fake makes pids up); it does nothing
// when there is no such container or it is not running.
func (f *Fake) SetPid(id string, pid int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.container(id); c != nil && c.details.State == docker.StateRunning {
		c.details.Pid = pid
	}
}

// checkedContainer does what every container method does first, with f.mu held: the
// injected error or outage for method, then the fault set for method on container id
// (faults.go), then the lookup of id, NotFound (naming op) when there is no such
// container.
func (f *Fake) checkedContainer(ctx context.Context, method, op, id string) (*fakeContainer, error) {
	if err := f.check(ctx, method); err != nil {
		return nil, err
	}
	if err := f.containerFault(method, id); err != nil {
		return nil, err
	}
	c := f.container(id)
	if c == nil {
		return nil, noSuchContainer(op, id)
	}
	return c, nil
}

// container finds a container as the engine does: by ID, name or unique ID prefix.
// Caller holds mu.
func (f *Fake) container(ref string) *fakeContainer {
	if ref == "" {
		return nil
	}
	if c, ok := f.containers[ref]; ok {
		return c
	}
	name := strings.TrimPrefix(ref, "/")
	var byPrefix []*fakeContainer
	for id, c := range f.containers {
		if c.details.Name == name {
			return c
		}
		if strings.HasPrefix(id, ref) {
			byPrefix = append(byPrefix, c)
		}
	}
	if len(byPrefix) == 1 {
		return byPrefix[0]
	}
	return nil
}

// notify wakes everyone waiting for a container change. Caller holds mu.
func (f *Fake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func noSuchContainer(op, id string) error {
	return fmt.Errorf("%s: no such container: %s: %w", op, id, cerrdefs.ErrNotFound)
}

// cloneSpec copies spec deeply, so callers never share the fake's slices and maps.
func cloneSpec(s docker.ContainerSpec) docker.ContainerSpec {
	s.Labels = maps.Clone(s.Labels)
	s.Entrypoint = slices.Clone(s.Entrypoint)
	s.Cmd = slices.Clone(s.Cmd)
	s.Env = slices.Clone(s.Env)
	s.CapAdd = slices.Clone(s.CapAdd)
	s.CapDrop = slices.Clone(s.CapDrop)
	s.SecurityOpt = slices.Clone(s.SecurityOpt)
	s.MaskedPaths = slices.Clone(s.MaskedPaths)
	s.ReadonlyPaths = slices.Clone(s.ReadonlyPaths)
	s.Sysctls = maps.Clone(s.Sysctls)
	s.GroupAdd = slices.Clone(s.GroupAdd)
	s.DNS = slices.Clone(s.DNS)
	s.DNSSearch = slices.Clone(s.DNSSearch)
	s.DNSOptions = slices.Clone(s.DNSOptions)
	s.ExtraHosts = slices.Clone(s.ExtraHosts)
	s.PortBindings = slices.Clone(s.PortBindings)
	s.Mounts = slices.Clone(s.Mounts)
	if s.LogConfig != nil {
		lc := *s.LogConfig
		lc.Config = maps.Clone(lc.Config)
		s.LogConfig = &lc
	}
	s.ImageMounts = slices.Clone(s.ImageMounts)
	s.Devices = slices.Clone(s.Devices)
	s.CDIDevices = slices.Clone(s.CDIDevices)
	s.Resources = cloneResources(s.Resources)
	return s
}

func cloneResources(r docker.Resources) docker.Resources {
	r.Unified = maps.Clone(r.Unified)
	r.Ulimits = slices.Clone(r.Ulimits)
	return r
}

// cloneDetails copies d deeply.
func cloneDetails(d docker.ContainerDetails) docker.ContainerDetails {
	d.Labels = maps.Clone(d.Labels)
	d.Env = slices.Clone(d.Env)
	d.Entrypoint = slices.Clone(d.Entrypoint)
	d.Cmd = slices.Clone(d.Cmd)
	d.Mounts = slices.Clone(d.Mounts)
	d.ImageMounts = slices.Clone(d.ImageMounts)
	d.Resources = cloneResources(d.Resources)
	return d
}
