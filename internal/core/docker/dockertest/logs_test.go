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

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
)

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

func TestLogDataAndChunks(t *testing.T) {
	f, id := running(t, docker.ContainerSpec{Name: "c"})
	t0 := time.Date(2024, 5, 1, 10, 0, 0, 1, time.UTC)
	f.AppendLogData(id, "stdout", "0123456789", t0) // the engine cut a long line
	f.AppendLogData(id, "stdout", "end\n", t0.Add(1))
	f.AppendLogData(id, "stderr", "prompt$ ", t0.Add(2))
	f.SetContainerState(id, docker.StateExited, 0)
	want := "2024-05-01T10:00:00.000000001Z 0123456789" + "2024-05-01T10:00:00.000000002Z end\n"

	for _, chunk := range []int{0, 1, 7} {
		t.Run(fmt.Sprint("chunk ", chunk), func(t *testing.T) {
			f.SetLogChunkSize(chunk)
			stdout, stderr := &writes{}, &writes{}
			assert.NilError(t, f.ContainerLogs(context.Background(), id, docker.LogsOptions{Follow: true, Stdout: stdout, Stderr: stderr}))
			assert.Equal(t, stdout.String(), want)
			assert.Equal(t, stderr.String(), "2024-05-01T10:00:00.000000003Z prompt$ ")
			largest := 0
			for _, w := range stdout.sizes {
				largest = max(largest, w)
			}
			if chunk == 0 {
				assert.Equal(t, len(stdout.sizes), 2, "one write per message")
			} else {
				assert.Equal(t, largest, chunk)
			}
		})
	}
}

// writes records what is written and the size of every Write.
type writes struct {
	buf   strings.Builder
	sizes []int
}

func (w *writes) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	return w.buf.Write(p)
}

func (w *writes) String() string { return w.buf.String() }

func TestLogSinceIgnoredAndRequests(t *testing.T) {
	f, id := running(t, docker.ContainerSpec{Name: "c"})
	t0 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	f.AppendLog(id, "stdout", "old", t0)
	f.AppendLog(id, "stdout", "new", t0.Add(time.Second))
	f.SetContainerState(id, docker.StateExited, 0)
	read := func() string {
		var out strings.Builder
		assert.NilError(t, f.ContainerLogs(context.Background(), "c", docker.LogsOptions{Since: t0.Add(time.Second), Stdout: &out}))
		return out.String()
	}
	assert.Equal(t, read(), "2024-05-01T10:00:01Z new\n")
	f.SetLogSinceIgnored(true)
	assert.Equal(t, read(), "2024-05-01T10:00:00Z old\n2024-05-01T10:00:01Z new\n")

	f.InjectError("ContainerLogs", errors.New("down"))
	assert.ErrorContains(t, f.ContainerLogs(context.Background(), "c", docker.LogsOptions{Follow: true}), "down")
	assert.DeepEqual(t, f.LogsRequests("c"), []docker.LogsOptions{
		{Since: t0.Add(time.Second)}, {Since: t0.Add(time.Second)}, {Follow: true},
	})
	assert.Check(t, is.Len(f.LogsRequests(id), 0), "by reference as passed")
}

func TestBreakLogs(t *testing.T) {
	f, id := running(t, docker.ContainerSpec{Name: "c"})
	t0 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	for i, line := range []string{"one", "two", "three"} {
		f.AppendLog(id, "stdout", line, t0.Add(time.Duration(i)*time.Second))
	}
	f.SetContainerState(id, docker.StateExited, 0)
	broken := errors.New("connection reset")
	read := func() (string, error) {
		var out strings.Builder
		err := f.ContainerLogs(context.Background(), id, docker.LogsOptions{Stdout: &out})
		return out.String(), err
	}

	f.BreakLogs(id, 1, 22, broken)
	got, err := read()
	assert.ErrorIs(t, err, broken)
	assert.Equal(t, got, "2024-05-01T10:00:00Z one\n2024-05-01T10:00:01Z t", "one message and 22 bytes of the next")
	got, err = read()
	assert.NilError(t, err, "the break happens once")
	assert.Equal(t, strings.Count(got, "\n"), 3)

	// A call that ends first leaves the break to the next one that gets there.
	f.BreakLogs(id, 3, 0, broken)
	_, err = read()
	assert.NilError(t, err)
	f.AppendLog(id, "stdout", "four", t0.Add(3*time.Second))
	got, err = read()
	assert.ErrorIs(t, err, broken)
	assert.Equal(t, strings.Count(got, "\n"), 3)
	f.BreakLogs("missing", 0, 0, broken)
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
