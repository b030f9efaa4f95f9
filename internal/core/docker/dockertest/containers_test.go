package dockertest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
)

const pauseID = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// withPause returns a fake engine holding the pause image.
func withPause() *dockertest.Fake {
	f := dockertest.New()
	f.AddImage(docker.Image{ID: pauseID, RepoTags: []string{"registry.k8s.io/pause:3.10"}})
	return f
}

func create(t *testing.T, f *dockertest.Fake, spec docker.ContainerSpec) string {
	t.Helper()
	if spec.Image == "" {
		spec.Image = "registry.k8s.io/pause:3.10"
	}
	id, err := f.CreateContainer(context.Background(), spec)
	assert.NilError(t, err)
	return id
}

func TestContainerLifecycle(t *testing.T) {
	ctx := context.Background()
	f := withPause()
	id := create(t, f, docker.ContainerSpec{
		Name: "k8s_POD_a", Labels: map[string]string{"k": "v"}, NetworkMode: "default", PidMode: "host", IpcMode: "shareable",
	})
	assert.Equal(t, len(id), 64)
	assert.DeepEqual(t, f.ContainerIDs(), []string{id})

	d, err := f.InspectContainer(ctx, id)
	assert.NilError(t, err)
	assert.Equal(t, d.State, docker.StateCreated)
	assert.Equal(t, d.Name, "k8s_POD_a")
	assert.Equal(t, d.Image, "registry.k8s.io/pause:3.10")
	assert.Equal(t, d.ImageID, pauseID)
	assert.Equal(t, d.Pid, 0)
	assert.Equal(t, d.IPAddress, "")
	assert.Equal(t, d.Hostname, id[:12], "the engine's default hostname")
	assert.Equal(t, d.NetworkMode, "default")
	assert.Equal(t, d.PidMode, "host")
	assert.Equal(t, d.IpcMode, "shareable")
	assert.Equal(t, d.LogPath, "/var/lib/docker/containers/"+id+"/"+id+"-json.log")
	assert.Assert(t, !d.Created.IsZero() && d.StartedAt.IsZero())

	assert.NilError(t, f.StartContainer(ctx, id))
	d, err = f.InspectContainer(ctx, id)
	assert.NilError(t, err)
	assert.Equal(t, d.State, docker.StateRunning)
	assert.Assert(t, d.Pid != 0)
	assert.Equal(t, d.IPAddress, "172.17.0.2")
	assert.Assert(t, !d.StartedAt.IsZero())
	pid := d.Pid
	assert.NilError(t, f.StartContainer(ctx, id), "starting a running container succeeds")
	d, _ = f.InspectContainer(ctx, id)
	assert.Equal(t, d.Pid, pid)

	assert.NilError(t, f.StopContainer(ctx, id, time.Second))
	d, err = f.InspectContainer(ctx, id)
	assert.NilError(t, err)
	assert.Equal(t, d.State, docker.StateExited)
	assert.Equal(t, d.ExitCode, 0)
	assert.Equal(t, d.Pid, 0)
	assert.Equal(t, d.IPAddress, "")
	assert.Assert(t, !d.FinishedAt.IsZero())
	assert.NilError(t, f.StopContainer(ctx, id, time.Second), "stopping a stopped container succeeds")

	assert.NilError(t, f.RemoveContainer(ctx, id))
	assert.Equal(t, len(f.ContainerIDs()), 0)
	_, err = f.InspectContainer(ctx, id)
	assert.Assert(t, cerrdefs.IsNotFound(err), "%v", err)
	assert.Assert(t, cerrdefs.IsNotFound(f.RemoveContainer(ctx, id)))
	assert.Assert(t, cerrdefs.IsNotFound(f.StartContainer(ctx, id)))
	assert.Assert(t, cerrdefs.IsNotFound(f.StopContainer(ctx, id, 0)))
	_, ok := f.Spec(id)
	assert.Assert(t, !ok)
}

func TestStopCreatedContainerLeavesItCreated(t *testing.T) {
	f := withPause()
	id := create(t, f, docker.ContainerSpec{Name: "c"})
	assert.NilError(t, f.StopContainer(context.Background(), id, 0))
	d, err := f.InspectContainer(context.Background(), id)
	assert.NilError(t, err)
	assert.Equal(t, d.State, docker.StateCreated)
}

func TestContainerCrashAndExitCode(t *testing.T) {
	ctx := context.Background()
	f := withPause()
	id := create(t, f, docker.ContainerSpec{Name: "c"})
	assert.NilError(t, f.StartContainer(ctx, id))

	f.SetContainerState(id, docker.StateExited, 137)
	d, err := f.InspectContainer(ctx, id)
	assert.NilError(t, err)
	assert.Equal(t, d.State, docker.StateExited)
	assert.Equal(t, d.ExitCode, 137)
	assert.Equal(t, d.Pid, 0)
	assert.Assert(t, !d.FinishedAt.IsZero())

	// Restarting clears the exit code; one set while running is kept by stop.
	assert.NilError(t, f.StartContainer(ctx, id))
	d, _ = f.InspectContainer(ctx, id)
	assert.Equal(t, d.ExitCode, 0)
	f.SetContainerState(id, docker.StateRunning, 143)
	assert.NilError(t, f.StopContainer(ctx, id, 0))
	d, _ = f.InspectContainer(ctx, id)
	assert.Equal(t, d.State, docker.StateExited)
	assert.Equal(t, d.ExitCode, 143)
}

func TestCreateContainerErrors(t *testing.T) {
	f := withPause()
	create(t, f, docker.ContainerSpec{Name: "taken"})
	for _, tc := range []struct {
		name    string
		spec    docker.ContainerSpec
		kind    func(error) bool
		message string
	}{
		{
			name:    "name in use",
			spec:    docker.ContainerSpec{Name: "taken", Image: "registry.k8s.io/pause:3.10"},
			kind:    cerrdefs.IsAlreadyExists,
			message: `"/taken" is already in use`,
		},
		{
			name:    "name in use, with a leading slash",
			spec:    docker.ContainerSpec{Name: "/taken", Image: "registry.k8s.io/pause:3.10"},
			kind:    cerrdefs.IsAlreadyExists,
			message: "taken",
		},
		{
			name:    "missing image",
			spec:    docker.ContainerSpec{Name: "new", Image: "busybox:1.36"},
			kind:    cerrdefs.IsNotFound,
			message: "no such image: busybox:1.36",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.CreateContainer(context.Background(), tc.spec)
			assert.Assert(t, tc.kind(err), "%v", err)
			assert.Assert(t, is.Contains(err.Error(), tc.message))
		})
	}
	assert.Equal(t, len(f.ContainerIDs()), 1)
}

func TestContainerAddressesByNetworkMode(t *testing.T) {
	for _, tc := range []struct {
		mode   string
		wantIP bool
	}{
		{mode: "", wantIP: true},
		{mode: "default", wantIP: true},
		{mode: "bridge", wantIP: true},
		{mode: "none"},
		{mode: "host"},
		{mode: "container:abc"},
	} {
		t.Run("mode "+tc.mode, func(t *testing.T) {
			ctx := context.Background()
			f := withPause()
			id := create(t, f, docker.ContainerSpec{Name: "c", NetworkMode: tc.mode, Hostname: "pod-host"})
			assert.NilError(t, f.StartContainer(ctx, id))
			d, err := f.InspectContainer(ctx, id)
			assert.NilError(t, err)
			assert.Equal(t, d.IPAddress != "", tc.wantIP, d.IPAddress)
			assert.Equal(t, d.NetworkMode, tc.mode)
			assert.Equal(t, d.Hostname, "pod-host")
		})
	}
}

func TestListContainersFilter(t *testing.T) {
	ctx := context.Background()
	f := withPause()
	a := create(t, f, docker.ContainerSpec{Name: "a", Labels: map[string]string{"pod": "p1", "type": "sandbox"}})
	b := create(t, f, docker.ContainerSpec{Name: "b", Labels: map[string]string{"pod": "p1", "type": "container"}})
	c := create(t, f, docker.ContainerSpec{Name: "c", Labels: map[string]string{"pod": "p2", "type": "sandbox"}})
	assert.NilError(t, f.StartContainer(ctx, a))
	assert.NilError(t, f.StartContainer(ctx, c))

	for _, tc := range []struct {
		name   string
		filter docker.ContainerFilter
		want   []string
	}{
		{name: "everything, newest first", want: []string{c, b, a}},
		{name: "running", filter: docker.ContainerFilter{Running: true}, want: []string{c, a}},
		{name: "full id", filter: docker.ContainerFilter{ID: b}, want: []string{b}},
		{name: "id prefix", filter: docker.ContainerFilter{ID: a[:12]}, want: []string{a}},
		{name: "one label", filter: docker.ContainerFilter{Labels: map[string]string{"pod": "p1"}}, want: []string{b, a}},
		{name: "all labels", filter: docker.ContainerFilter{Labels: map[string]string{"pod": "p1", "type": "sandbox"}}, want: []string{a}},
		{name: "label value differs", filter: docker.ContainerFilter{Labels: map[string]string{"pod": "p3"}}},
		{name: "labels and running", filter: docker.ContainerFilter{Labels: map[string]string{"pod": "p1"}, Running: true}, want: []string{a}},
		{name: "unknown id", filter: docker.ContainerFilter{ID: "ffff"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, err := f.ListContainers(ctx, tc.filter)
			assert.NilError(t, err)
			var got []string
			for _, c := range list {
				got = append(got, c.ID)
			}
			assert.DeepEqual(t, got, tc.want)
		})
	}

	list, err := f.ListContainers(ctx, docker.ContainerFilter{ID: a})
	assert.NilError(t, err)
	assert.Equal(t, len(list), 1)
	assert.Equal(t, list[0].Name, "a")
	assert.Equal(t, list[0].State, docker.StateRunning)
	assert.Equal(t, list[0].ImageID, pauseID)
	list[0].Labels["pod"] = "changed"
	list, _ = f.ListContainers(ctx, docker.ContainerFilter{ID: a})
	assert.Equal(t, list[0].Labels["pod"], "p1", "callers get copies")
}

func TestListContainersSize(t *testing.T) {
	ctx := context.Background()
	f := withPause()
	a := create(t, f, docker.ContainerSpec{Name: "a"})
	f.SetWritableSize(a, 4096)

	list, err := f.ListContainers(ctx, docker.ContainerFilter{ID: a})
	assert.NilError(t, err)
	assert.Equal(t, list[0].SizeRw, int64(0), "sizes only when asked for")
	list, err = f.ListContainers(ctx, docker.ContainerFilter{ID: a, Size: true})
	assert.NilError(t, err)
	assert.Equal(t, list[0].SizeRw, int64(4096))
}

func TestSpecAndUpdateResources(t *testing.T) {
	ctx := context.Background()
	f := withPause()
	spec := docker.ContainerSpec{
		Name:        "c",
		Image:       "registry.k8s.io/pause:3.10",
		Cmd:         []string{"sleep", "1"},
		MaskedPaths: []string{},
		Mounts:      []docker.Mount{{Source: "/a", Target: "/b", ReadOnly: true}},
		Resources:   docker.Resources{CPUShares: 2, Unified: map[string]string{"memory.high": "1"}},
	}
	id := create(t, f, spec)
	spec.Cmd[0] = "changed by the caller"
	got, ok := f.Spec(id)
	assert.Assert(t, ok)
	assert.DeepEqual(t, got.Cmd, []string{"sleep", "1"})
	assert.Assert(t, got.MaskedPaths != nil && len(got.MaskedPaths) == 0, "empty, not nil, survives")
	assert.Assert(t, got.ReadonlyPaths == nil)
	got.Resources.Unified["memory.high"] = "2"

	d, err := f.InspectContainer(ctx, id)
	assert.NilError(t, err)
	assert.DeepEqual(t, d.Mounts, spec.Mounts)
	assert.DeepEqual(t, d.Resources, docker.Resources{CPUShares: 2, Unified: map[string]string{"memory.high": "1"}})

	r := docker.Resources{CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 1 << 20}
	assert.NilError(t, f.UpdateContainerResources(ctx, id, r))
	d, _ = f.InspectContainer(ctx, id)
	assert.DeepEqual(t, d.Resources, r)
	got, _ = f.Spec(id)
	assert.DeepEqual(t, got.Resources, r)
	assert.Assert(t, cerrdefs.IsNotFound(f.UpdateContainerResources(ctx, "missing", r)))
}

func TestContainerInjectedErrors(t *testing.T) {
	f := withPause()
	id := create(t, f, docker.ContainerSpec{Name: "c"})
	assert.NilError(t, f.StartContainer(context.Background(), id))
	calls := map[string]func(ctx context.Context) error{
		"CreateContainer": func(ctx context.Context) error {
			_, err := f.CreateContainer(ctx, docker.ContainerSpec{Name: "new", Image: "registry.k8s.io/pause:3.10"})
			return err
		},
		"StartContainer":  func(ctx context.Context) error { return f.StartContainer(ctx, id) },
		"StopContainer":   func(ctx context.Context) error { return f.StopContainer(ctx, id, 0) },
		"RemoveContainer": func(ctx context.Context) error { return f.RemoveContainer(ctx, id) },
		"ListContainers": func(ctx context.Context) error {
			_, err := f.ListContainers(ctx, docker.ContainerFilter{})
			return err
		},
		"InspectContainer": func(ctx context.Context) error {
			_, err := f.InspectContainer(ctx, id)
			return err
		},
		"UpdateContainerResources": func(ctx context.Context) error {
			return f.UpdateContainerResources(ctx, id, docker.Resources{})
		},
		"Exec": func(ctx context.Context) error {
			_, err := f.Exec(ctx, id, docker.ExecOptions{Cmd: []string{"true"}})
			return err
		},
		"Attach": func(ctx context.Context) error {
			return f.Attach(ctx, id, docker.AttachOptions{Stdin: strings.NewReader(""), Stdout: io.Discard})
		},
		"ContainerLogs": func(ctx context.Context) error {
			return f.ContainerLogs(ctx, id, docker.LogsOptions{Stdout: io.Discard})
		},
		"ContainerStats": func(ctx context.Context) error {
			_, err := f.ContainerStats(ctx, id)
			return err
		},
	}
	injected := fmt.Errorf("injected: %w", cerrdefs.ErrInternal)
	for method, call := range calls {
		t.Run(method, func(t *testing.T) {
			ctx := context.Background()
			before := f.Calls(method)
			f.InjectError(method, injected)
			assert.Assert(t, errors.Is(call(ctx), injected))
			f.InjectError(method, nil)

			f.SetDown(true)
			assert.Assert(t, cerrdefs.IsUnavailable(call(ctx)))
			f.SetDown(false)

			cctx, cancel := context.WithCancel(ctx)
			cancel()
			assert.Assert(t, errors.Is(call(cctx), context.Canceled))
			assert.Equal(t, f.Calls(method), before+3)
		})
	}
	// None of the failed calls changed anything.
	assert.DeepEqual(t, f.ContainerIDs(), []string{id})
	d, err := f.InspectContainer(context.Background(), id)
	assert.NilError(t, err)
	assert.Equal(t, d.State, docker.StateRunning)
}

// running returns a fake engine with one running container of spec.
func running(t *testing.T, spec docker.ContainerSpec) (*dockertest.Fake, string) {
	t.Helper()
	f := withPause()
	id := create(t, f, spec)
	assert.NilError(t, f.StartContainer(context.Background(), id))
	return f, id
}

func TestSetPid(t *testing.T) {
	f, id := running(t, docker.ContainerSpec{Name: "c"})
	f.SetPid(id, os.Getpid())
	d, err := f.InspectContainer(context.Background(), "c")
	assert.NilError(t, err)
	assert.Equal(t, d.Pid, os.Getpid())

	f.SetContainerState(id, docker.StateExited, 0)
	f.SetPid(id, 42) // not running: no process to name
	d, err = f.InspectContainer(context.Background(), id)
	assert.NilError(t, err)
	assert.Equal(t, d.Pid, 0)
	f.SetPid("missing", 42)
}
