package dockertest_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"

	"github.com/dockpin/cri-dockerd/core/docker"
	"github.com/dockpin/cri-dockerd/core/docker/dockertest"
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

func TestExec(t *testing.T) {
	ctx := context.Background()
	f := withPause()
	id := create(t, f, docker.ContainerSpec{Name: "c"})

	_, err := f.Exec(ctx, id, docker.ExecOptions{Cmd: []string{"true"}})
	assert.Assert(t, cerrdefs.IsFailedPrecondition(err), "created, not running: %v", err)
	_, err = f.Exec(ctx, "missing", docker.ExecOptions{Cmd: []string{"true"}})
	assert.Assert(t, cerrdefs.IsNotFound(err), "%v", err)

	assert.NilError(t, f.StartContainer(ctx, id))
	var stdout bytes.Buffer
	code, err := f.Exec(ctx, id, docker.ExecOptions{Cmd: []string{"true"}, Stdout: &stdout})
	assert.NilError(t, err)
	assert.Equal(t, code, 0, "the default handler succeeds")
	assert.Equal(t, stdout.Len(), 0)

	var gotID string
	f.SetExecHandler(func(id string, opts docker.ExecOptions) (int, error) {
		gotID = id
		in, _ := io.ReadAll(opts.Stdin)
		_, _ = fmt.Fprintf(opts.Stdout, "%s:%s", strings.Join(opts.Cmd, " "), in)
		_, _ = io.WriteString(opts.Stderr, "warning")
		return 2, nil
	})
	var stderr bytes.Buffer
	stdout.Reset()
	code, err = f.Exec(ctx, id[:12], docker.ExecOptions{Cmd: []string{"cat"}, Stdin: strings.NewReader("in"), Stdout: &stdout, Stderr: &stderr})
	assert.NilError(t, err)
	assert.Equal(t, code, 2)
	assert.Equal(t, gotID, id, "the handler gets the full ID")
	assert.Equal(t, stdout.String(), "cat:in")
	assert.Equal(t, stderr.String(), "warning")

	f.SetExecHandler(func(string, docker.ExecOptions) (int, error) { return 0, errors.New("exec broke") })
	_, err = f.Exec(ctx, id, docker.ExecOptions{Cmd: []string{"x"}})
	assert.ErrorContains(t, err, "exec broke")

	release := make(chan struct{})
	defer close(release)
	f.SetExecHandler(func(string, docker.ExecOptions) (int, error) {
		<-release
		return 0, nil
	})
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = f.Exec(tctx, id, docker.ExecOptions{Cmd: []string{"sleep", "inf"}})
	assert.Assert(t, errors.Is(err, context.DeadlineExceeded), "%v", err)

	f.SetExecHandler(nil)
	code, err = f.Exec(ctx, id, docker.ExecOptions{Cmd: []string{"true"}})
	assert.NilError(t, err)
	assert.Equal(t, code, 0)
}

func TestContainerLogs(t *testing.T) {
	ctx := context.Background()
	f := withPause()
	id := create(t, f, docker.ContainerSpec{Name: "c"})
	ttyID := create(t, f, docker.ContainerSpec{Name: "tty", Tty: true})
	t0 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	for _, cid := range []string{id, ttyID} {
		f.AppendLog(cid, "stdout", "one", t0)
		f.AppendLog(cid, "stderr", "two\n", t0.Add(time.Second))
		f.AppendLog(cid, "stdout", "three", t0.Add(2*time.Second))
	}
	for _, tc := range []struct {
		name       string
		id         string
		since      time.Time
		wantStdout string
		wantStderr string
	}{
		{
			name:       "everything",
			id:         id,
			wantStdout: "2024-05-01T10:00:00Z one\n2024-05-01T10:00:02Z three\n",
			wantStderr: "2024-05-01T10:00:01Z two\n",
		},
		{
			name:       "since",
			id:         id,
			since:      t0.Add(time.Second),
			wantStdout: "2024-05-01T10:00:02Z three\n",
			wantStderr: "2024-05-01T10:00:01Z two\n",
		},
		{
			name:       "tty: all on stdout",
			id:         ttyID,
			wantStdout: "2024-05-01T10:00:00Z one\n2024-05-01T10:00:01Z two\n2024-05-01T10:00:02Z three\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := f.ContainerLogs(ctx, tc.id, docker.LogsOptions{Since: tc.since, Stdout: &stdout, Stderr: &stderr})
			assert.NilError(t, err)
			assert.Equal(t, stdout.String(), tc.wantStdout)
			assert.Equal(t, stderr.String(), tc.wantStderr)
		})
	}
	err := f.ContainerLogs(ctx, "missing", docker.LogsOptions{Stdout: io.Discard})
	assert.Assert(t, cerrdefs.IsNotFound(err), "%v", err)

	// Follow on a container that is not running ends after the stored lines.
	assert.NilError(t, f.ContainerLogs(ctx, id, docker.LogsOptions{Follow: true, Stdout: io.Discard, Stderr: io.Discard}))
}

// followLogs follows id's stdout through a pipe; the returned channel gets
// ContainerLogs' result.
func followLogs(ctx context.Context, f *dockertest.Fake, id string) (*bufio.Reader, <-chan error) {
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := f.ContainerLogs(ctx, id, docker.LogsOptions{Follow: true, Stdout: w, Stderr: io.Discard})
		_ = w.CloseWithError(io.EOF)
		done <- err
	}()
	return bufio.NewReader(r), done
}

func TestContainerLogsFollow(t *testing.T) {
	ctx := context.Background()
	f := withPause()
	id := create(t, f, docker.ContainerSpec{Name: "c"})
	assert.NilError(t, f.StartContainer(ctx, id))
	t0 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	f.AppendLog(id, "stdout", "before", t0)

	out, done := followLogs(ctx, f, id)
	line, err := out.ReadString('\n')
	assert.NilError(t, err)
	assert.Equal(t, line, "2024-05-01T10:00:00Z before\n")

	f.AppendLog(id, "stdout", "after", t0.Add(time.Second))
	f.AppendLog(id, "stderr", "elsewhere", t0.Add(time.Second))
	line, err = out.ReadString('\n')
	assert.NilError(t, err)
	assert.Equal(t, line, "2024-05-01T10:00:01Z after\n")

	f.AppendLog(id, "stdout", "last", t0.Add(2*time.Second))
	assert.NilError(t, f.StopContainer(ctx, id, 0))
	rest, err := io.ReadAll(out)
	assert.NilError(t, err)
	assert.Equal(t, string(rest), "2024-05-01T10:00:02Z last\n")
	assert.NilError(t, <-done, "the stream ends when the container stops")

	// Removal ends a follow too, and ctx ending ends it with ctx's error.
	assert.NilError(t, f.StartContainer(ctx, id))
	out, done = followLogs(ctx, f, id)
	_, _ = out.ReadString('\n')
	assert.NilError(t, f.RemoveContainer(ctx, id))
	_, _ = io.ReadAll(out)
	assert.NilError(t, <-done)

	id = create(t, f, docker.ContainerSpec{Name: "d"})
	assert.NilError(t, f.StartContainer(ctx, id))
	f.AppendLog(id, "stdout", "running", t0)
	cctx, cancel := context.WithCancel(ctx)
	out, done = followLogs(cctx, f, id)
	_, _ = out.ReadString('\n') // the follow is waiting for more now
	cancel()
	assert.Assert(t, errors.Is(<-done, context.Canceled))
}

func TestContainerStats(t *testing.T) {
	ctx := context.Background()
	f := withPause()
	id := create(t, f, docker.ContainerSpec{Name: "c"})

	before := time.Now()
	s, err := f.ContainerStats(ctx, id)
	assert.NilError(t, err)
	assert.Assert(t, !s.Timestamp.Before(before))
	assert.Equal(t, s.CPUUsageNanos, uint64(0))

	want := docker.ContainerStats{
		Timestamp: time.Unix(1700000000, 0), CPUUsageNanos: 5, MemoryWorkingSetBytes: 100,
		Networks: map[string]docker.NetworkStats{"eth0": {RxBytes: 1}},
	}
	f.SetStats(id, want)
	s, err = f.ContainerStats(ctx, id)
	assert.NilError(t, err)
	assert.DeepEqual(t, s, want)
	s.Networks["eth0"] = docker.NetworkStats{}
	s, _ = f.ContainerStats(ctx, id)
	assert.DeepEqual(t, s, want)

	_, err = f.ContainerStats(ctx, "missing")
	assert.Assert(t, cerrdefs.IsNotFound(err), "%v", err)
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

func TestAttach(t *testing.T) {
	ctx := context.Background()
	f := withPause()
	id := create(t, f, docker.ContainerSpec{Name: "c", OpenStdin: true})

	err := f.Attach(ctx, id, docker.AttachOptions{Stdout: io.Discard})
	assert.Assert(t, cerrdefs.IsFailedPrecondition(err), "created, not running: %v", err)
	assert.ErrorContains(t, err, "attach to container "+id+": container is not running (created)")
	err = f.Attach(ctx, "missing", docker.AttachOptions{Stdout: io.Discard})
	assert.Assert(t, cerrdefs.IsNotFound(err), "%v", err)
	assert.NilError(t, f.StartContainer(ctx, id))

	// The default echoes stdin to stdout until it ends.
	var stdout bytes.Buffer
	assert.NilError(t, f.Attach(ctx, id[:12], docker.AttachOptions{Stdin: strings.NewReader("hello\n"), Stdout: &stdout}))
	assert.Equal(t, stdout.String(), "hello\n")

	// Without stdin it lasts until ctx ends...
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err = f.Attach(tctx, id, docker.AttachOptions{Stdout: io.Discard})
	assert.Assert(t, errors.Is(err, context.DeadlineExceeded), "%v", err)

	var gotID string
	f.SetAttachHandler(func(id string, opts docker.AttachOptions) error {
		gotID = id
		in, _ := io.ReadAll(opts.Stdin)
		_, _ = fmt.Fprintf(opts.Stdout, "out:%s", in)
		_, _ = io.WriteString(opts.Stderr, "warning")
		for size := range opts.Resize { // until the caller's sizes end
			_, _ = fmt.Fprintf(opts.Stdout, " %dx%d", size.Width, size.Height)
		}
		return nil
	})
	var stderr bytes.Buffer
	stdout.Reset()
	sizes := make(chan docker.TerminalSize, 1)
	sizes <- docker.TerminalSize{Width: 80, Height: 24}
	close(sizes)
	err = f.Attach(ctx, "c", docker.AttachOptions{Stdin: strings.NewReader("in"), Stdout: &stdout, Stderr: &stderr, Tty: true, Resize: sizes})
	assert.NilError(t, err)
	assert.Equal(t, gotID, id, "the handler gets the full ID")
	assert.Equal(t, stdout.String(), "out:in 80x24", "the handler gets the recorded sizes")
	assert.Equal(t, stderr.String(), "warning")
	assert.Equal(t, f.AttachedStdin(id), "hello\nin", "what the process read from every attach")
	assert.Equal(t, f.AttachedStdin("missing"), "")

	f.SetAttachHandler(func(string, docker.AttachOptions) error { return errors.New("attach broke") })
	assert.ErrorContains(t, f.Attach(ctx, id, docker.AttachOptions{Stdout: io.Discard}), "attach broke")

	release := make(chan struct{})
	defer close(release)
	f.SetAttachHandler(func(string, docker.AttachOptions) error {
		<-release
		return nil
	})
	tctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err = f.Attach(tctx, id, docker.AttachOptions{Stdout: io.Discard})
	assert.Assert(t, errors.Is(err, context.DeadlineExceeded), "%v", err)

	f.SetAttachHandler(nil)
	stdout.Reset()
	assert.NilError(t, f.Attach(ctx, id, docker.AttachOptions{Stdin: strings.NewReader("again"), Stdout: &stdout}))
	assert.Equal(t, stdout.String(), "again")
}

// attachInBackground runs Attach with opts and returns its result channel once the
// fake has accepted the call (found the container running).
func attachInBackground(t *testing.T, f *dockertest.Fake, id string, opts docker.AttachOptions) <-chan error {
	t.Helper()
	active := f.Active("Attach")
	done := make(chan error, 1)
	go func() { done <- f.Attach(context.Background(), id, opts) }()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if f.Active("Attach") > active {
			return poll.Success()
		}
		return poll.Continue("attach not accepted yet")
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(time.Millisecond))
	return done
}

func TestAttachEndsWhenContainerStops(t *testing.T) {
	ctx := context.Background()
	f := withPause()
	id := create(t, f, docker.ContainerSpec{Name: "c", OpenStdin: true})
	assert.NilError(t, f.StartContainer(ctx, id))

	// Waiting without stdin, and echoing a stdin that stays open, both end with the process.
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	var stdout bytes.Buffer
	waiting := attachInBackground(t, f, id, docker.AttachOptions{Stdout: io.Discard, Stderr: io.Discard})
	echoing := attachInBackground(t, f, id, docker.AttachOptions{Stdin: stdinR, Stdout: &stdout})
	f.SetContainerState(id, docker.StateExited, 137)
	for _, done := range []<-chan error{waiting, echoing} {
		select {
		case err := <-done:
			assert.NilError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("attach outlived the container's process")
		}
	}
	// The echo's stdin copy writes nothing after Attach returned.
	_, err := io.WriteString(stdinW, "late")
	assert.NilError(t, err)
	assert.Equal(t, stdout.Len(), 0)

	assert.NilError(t, f.StartContainer(ctx, id))
	removed := attachInBackground(t, f, id, docker.AttachOptions{Stdout: io.Discard})
	assert.NilError(t, f.RemoveContainer(ctx, id))
	select {
	case err := <-removed:
		assert.NilError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("attach outlived the container")
	}
}

// receive takes n sizes from a handler's Resize (recorded by then).
func receive(sizes <-chan docker.TerminalSize, n int) {
	for range n {
		<-sizes
	}
}

func TestResizes(t *testing.T) {
	ctx := context.Background()
	f := withPause()
	id := create(t, f, docker.ContainerSpec{Name: "c", Tty: true})
	assert.NilError(t, f.StartContainer(ctx, id))
	assert.Assert(t, f.Resizes(id) == nil)
	assert.Assert(t, f.Resizes("missing") == nil)

	// Attach and exec sizes are recorded in order while the call lasts.
	f.SetAttachHandler(func(_ string, opts docker.AttachOptions) error {
		receive(opts.Resize, 2)
		return nil
	})
	f.SetExecHandler(func(_ string, opts docker.ExecOptions) (int, error) {
		receive(opts.Resize, 1)
		return 0, nil
	})
	sizes := make(chan docker.TerminalSize)
	go func() {
		sizes <- docker.TerminalSize{Width: 80, Height: 24}
		sizes <- docker.TerminalSize{Width: 100, Height: 30}
	}()
	assert.NilError(t, f.Attach(ctx, id, docker.AttachOptions{Tty: true, Stdout: io.Discard, Resize: sizes}))
	assert.DeepEqual(t, f.Resizes(id), []docker.TerminalSize{{Width: 80, Height: 24}, {Width: 100, Height: 30}})
	go func() { sizes <- docker.TerminalSize{Width: 120, Height: 40} }()
	_, err := f.Exec(ctx, "c", docker.ExecOptions{Cmd: []string{"sh"}, Tty: true, Resize: sizes})
	assert.NilError(t, err)
	assert.DeepEqual(t, f.Resizes(id), []docker.TerminalSize{{Width: 80, Height: 24}, {Width: 100, Height: 30}, {Width: 120, Height: 40}})

	// Nothing reads the sizes once the call returned, nor without a TTY.
	f.SetAttachHandler(nil)
	f.SetExecHandler(nil)
	_, err = f.Exec(ctx, id, docker.ExecOptions{Cmd: []string{"true"}, Resize: sizes})
	assert.NilError(t, err)
	assert.NilError(t, f.Attach(ctx, id, docker.AttachOptions{Stdin: strings.NewReader(""), Stdout: io.Discard, Resize: sizes}))
	select {
	case sizes <- docker.TerminalSize{Width: 1, Height: 1}:
		t.Fatal("a size was read after the call returned")
	case <-time.After(50 * time.Millisecond):
	}
	assert.Equal(t, len(f.Resizes(id)), 3)
}
