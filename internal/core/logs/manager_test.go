package logs

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/sirupsen/logrus"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
)

func testLogger(t *testing.T) logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(testWriter{t})
	l.SetLevel(logrus.DebugLevel)
	return l
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

func newTestManager(t *testing.T, src Source, cfg Config) *Manager {
	if cfg.RetryInitial == 0 {
		cfg.RetryInitial = 5 * time.Millisecond
		cfg.RetryMax = 20 * time.Millisecond
	}
	m := NewManager(src, cfg, testLogger(t))
	t.Cleanup(m.Close)
	return m
}

func waitDone(t *testing.T, m *Manager, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	assert.NilError(t, m.Wait(ctx, id))
}

func crLine(ts time.Time, stream, tag, content string) string {
	return ts.UTC().Format(timeFormat) + " " + stream + " " + tag + " " + content + "\n"
}

func TestManagerCopiesLog(t *testing.T) {
	big := strings.Repeat("x", 40000)
	tests := []struct {
		name    string
		maxLine int
		msgs    []logMsg
		want    string
	}{
		{
			name: "stdout and stderr lines",
			msgs: []logMsg{
				{at(1), "stdout", "out one\n"},
				{at(2), "stderr", "err one\n"},
				{at(time.Second), "stdout", "out two\n"},
			},
			want: crLine(at(1), "stdout", "F", "out one") +
				crLine(at(2), "stderr", "F", "err one") +
				crLine(at(time.Second), "stdout", "F", "out two"),
		},
		{
			name: "long line split at the default maximum",
			msgs: []logMsg{{at(1), "stdout", big + "\n"}},
			want: crLine(at(1), "stdout", "P", big[:16384]) +
				crLine(at(1), "stdout", "P", big[:16384]) +
				crLine(at(1), "stdout", "F", big[:40000-2*16384]),
		},
		{
			name:    "long line split at a configured maximum",
			maxLine: 10,
			msgs:    []logMsg{{at(1), "stderr", "0123456789abcdefghij!\n"}},
			want: crLine(at(1), "stderr", "P", "0123456789") +
				crLine(at(1), "stderr", "P", "abcdefghij") +
				crLine(at(1), "stderr", "F", "!"),
		},
		{
			name: "line the engine cut into partial messages",
			msgs: []logMsg{
				{at(1), "stdout", big[:engineChunkLen]},
				{at(2), "stdout", big[:engineChunkLen]},
				{at(3), "stdout", "end\n"},
			},
			want: crLine(at(1), "stdout", "P", big[:engineChunkLen]) +
				crLine(at(2), "stdout", "P", big[:engineChunkLen]) +
				crLine(at(3), "stdout", "F", "end"),
		},
		{
			name: "engine cut a line and logged the other stream in between",
			msgs: []logMsg{
				{at(1), "stdout", big[:engineChunkLen]},
				{at(2), "stderr", "err\n"},
				{at(3), "stdout", "tail\n"},
			},
			want: crLine(at(1), "stdout", "P", big[:engineChunkLen]) +
				crLine(at(2), "stderr", "F", "err") +
				crLine(at(3), "stdout", "F", "tail"),
		},
		{
			name: "missing newline at the end",
			msgs: []logMsg{
				{at(1), "stdout", "line\n"},
				{at(2), "stderr", "no newline"},
				{at(3), "stdout", "prompt$ "},
			},
			want: crLine(at(1), "stdout", "F", "line") +
				crLine(at(2), "stderr", "P", "no newline") +
				crLine(at(3), "stdout", "P", "prompt$ "),
		},
	}
	for _, tc := range tests {
		for _, chunk := range []int{0, 1, 7} {
			t.Run(fmt.Sprintf("%s/writes of %d bytes", tc.name, chunk), func(t *testing.T) {
				e := newEngine()
				e.SetLogChunkSize(chunk)
				addLogs(t, e, "c1", tc.msgs...)
				finish(e, "c1")
				m := newTestManager(t, e, Config{MaxLineSize: tc.maxLine})
				path := filepath.Join(t.TempDir(), "0.log")

				assert.NilError(t, startAt(m, context.Background(), "c1", path))
				waitDone(t, m, "c1")
				assert.Equal(t, readFile(t, path), tc.want)
				readCRI(t, path)
				assert.Check(t, is.DeepEqual(m.Stats(), Stats{
					Lines: int64(strings.Count(tc.want, "\n")), Bytes: int64(len(tc.want)),
				}))

				fi, err := os.Stat(path)
				assert.NilError(t, err)
				assert.Equal(t, fi.Mode().Perm(), os.FileMode(0o640)&^currentUmask())
			})
		}
	}
}

// currentUmask returns the process umask bits that apply to 0640.
func currentUmask() os.FileMode {
	dir, err := os.MkdirTemp("", "umask")
	if err != nil {
		return 0
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "f")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o777)
	if err != nil {
		return 0
	}
	f.Close()
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return 0o777 &^ fi.Mode().Perm()
}

func TestManagerFollows(t *testing.T) {
	e, m, path := copyingOne(t, logMsg{at(1), "stdout", "first\n"})

	addLogs(t, e, "c1", logMsg{at(2), "stderr", "second\n"})
	waitLines(t, path, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, m.Wait(ctx, "c1"), context.DeadlineExceeded, "still following")

	addLogs(t, e, "c1", logMsg{at(3), "stdout", "third\n"})
	finish(e, "c1")
	waitDone(t, m, "c1")
	assert.DeepEqual(t, logical(readCRI(t, path)), []string{"stdout first", "stderr second", "stdout third"})
}

// waitRequests waits until the engine got at least n log requests for container name.
func waitRequests(t *testing.T, e *dockertest.Fake, name string, n int) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if got := len(e.LogsRequests(name)); got < n {
			return poll.Continue("%d requests", got)
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Second), poll.WithDelay(time.Millisecond))
}

func TestManagerStopAndClose(t *testing.T) {
	before := runtime.NumGoroutine()
	e := newEngine()
	m := NewManager(e, Config{}, testLogger(t))
	dir := t.TempDir()
	for i := range 3 {
		id := fmt.Sprintf("c%d", i)
		addLogs(t, e, id, logMsg{at(1), "stdout", "a\n"}, logMsg{at(2), "stdout", "half a line"})
		assert.NilError(t, startAt(m, context.Background(), id, filepath.Join(dir, id+".log")))
		waitLines(t, filepath.Join(dir, id+".log"), 1)
	}

	m.Stop("c0")
	// What the engine sent is written, the unfinished line as a partial one.
	assert.Equal(t, readFile(t, filepath.Join(dir, "c0.log")),
		crLine(at(1), "stdout", "F", "a")+crLine(at(2), "stdout", "P", "half a line"))
	assert.Assert(t, errdefs.IsNotFound(m.Wait(context.Background(), "c0")))
	assert.Assert(t, errdefs.IsFailedPrecondition(m.Reopen("c0")))
	m.Stop("c0") // twice is fine
	m.Stop("never started")

	// Wait, waiting for a copier (it has found it once it asks for its context's
	// Done), returns FailedPrecondition when Close stops it.
	waiting := &doneSignal{Context: context.Background(), called: make(chan struct{})}
	waitErr := make(chan error, 1)
	go func() { waitErr <- m.Wait(waiting, "c1") }()
	<-waiting.called
	m.Close()
	err := <-waitErr
	assert.Assert(t, errdefs.IsFailedPrecondition(err), "%v", err)
	assert.Assert(t, errdefs.IsFailedPrecondition(startAt(m, context.Background(), "c9", filepath.Join(dir, "c9.log"))))

	// No goroutine of the copiers is left; the poll's check runs in a goroutine of
	// its own, which it counts.
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if n := runtime.NumGoroutine() - 1; n > before {
			var b strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
			return poll.Continue("%d goroutines, %d before:\n%s", n, before, b.String())
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Second), poll.WithDelay(5*time.Millisecond))
}

// doneSignal is a context that closes called when its Done is first asked for: the
// code under test has got as far as waiting on it.
type doneSignal struct {
	context.Context
	once   sync.Once
	called chan struct{}
}

func (c *doneSignal) Done() <-chan struct{} {
	c.once.Do(func() { close(c.called) })
	return c.Context.Done()
}

func TestManagerStart(t *testing.T) {
	e := newEngine()
	m := newTestManager(t, e, Config{})
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	addLogs(t, e, "c1", logMsg{at(1), "stdout", "a\n"})

	assert.NilError(t, startAt(m, context.Background(), "c1", path))
	waitLines(t, path, 1)
	// Starting again is a no-op: no second copier, no duplicate lines.
	assert.NilError(t, startAt(m, context.Background(), "c1", path))
	addLogs(t, e, "c1", logMsg{at(2), "stdout", "b\n"})
	finish(e, "c1")
	waitDone(t, m, "c1")
	assert.Equal(t, len(sinces(e, "c1")), 1)

	// Starting a finished copier copies what was logged since, once.
	assert.NilError(t, startAt(m, context.Background(), "c1", path))
	waitDone(t, m, "c1")
	assert.DeepEqual(t, logical(readCRI(t, path)), []string{"stdout a", "stdout b"})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, startAt(m, ctx, "c2", path), context.Canceled)
	assert.Assert(t, errdefs.IsInvalidArgument(startAt(m, context.Background(), "", path)))
	assert.Assert(t, errdefs.IsFailedPrecondition(startAt(m, context.Background(), "c3", filepath.Join(dir, "missing", "0.log"))))
	assert.Assert(t, errdefs.IsNotFound(m.Wait(context.Background(), "c3")))
}

func TestManagerCopierOutlivesStartContext(t *testing.T) {
	e := newEngine()
	m := newTestManager(t, e, Config{})
	path := filepath.Join(t.TempDir(), "0.log")
	addLogs(t, e, "c1") // running, nothing logged yet
	ctx, cancel := context.WithCancel(context.Background())
	assert.NilError(t, startAt(m, ctx, "c1", path))
	cancel()
	addLogs(t, e, "c1", logMsg{at(1), "stdout", "after the request\n"})
	finish(e, "c1")
	waitDone(t, m, "c1")
	assert.DeepEqual(t, logical(readCRI(t, path)), []string{"stdout after the request"})
}

// concurrentSource writes stdout and stderr from two goroutines in small pieces.
type concurrentSource struct{ lines int }

func (s concurrentSource) ContainerLogs(_ context.Context, _ string, opts docker.LogsOptions) error {
	var wg sync.WaitGroup
	for i, w := range []io.Writer{opts.Stdout, opts.Stderr} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range s.lines {
				msg := engineTime(at(time.Duration(2*n+i))) + " " + fmt.Sprintf("%d-%d-%s\n", i, n, strings.Repeat("x", 100))
				for len(msg) > 0 {
					k := min(7, len(msg))
					_, _ = w.Write([]byte(msg[:k]))
					msg = msg[k:]
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

func TestManagerStreamsDoNotInterleave(t *testing.T) {
	const lines = 200
	m := newTestManager(t, concurrentSource{lines: lines}, Config{MaxLineSize: 64})
	path := startCopy(t, m, "c1")
	waitDone(t, m, "c1")

	got := logical(readCRI(t, path))
	assert.Equal(t, len(got), 2*lines)
	next := map[string]int{}
	for _, l := range got {
		stream, content, _ := strings.Cut(l, " ")
		i := 0
		if stream == "stderr" {
			i = 1
		}
		assert.Equal(t, content, fmt.Sprintf("%d-%d-%s", i, next[stream], strings.Repeat("x", 100)))
		next[stream]++
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{name: "zero means defaults", cfg: Config{}},
		{name: "defaults", cfg: DefaultConfig()},
		{name: "negative line size", cfg: Config{MaxLineSize: -1}, wantErr: true},
		{name: "negative retry", cfg: Config{RetryInitial: -time.Second}, wantErr: true},
		{name: "max below initial", cfg: Config{RetryInitial: time.Second, RetryMax: time.Millisecond}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.wantErr {
				assert.Assert(t, errdefs.IsInvalidArgument(err), "%v", err)
			} else {
				assert.NilError(t, err)
			}
		})
	}
	d := Config{}.withDefaults()
	assert.Equal(t, d, DefaultConfig())
}

// startAt records path (its directory as the pod's log directory) as container id's
// log file and starts copying it.
// copyingOne is a manager copying container c1's log, one message so far, to the
// file at path, which has that line.
func copyingOne(t *testing.T, msg logMsg) (*dockertest.Fake, *Manager, string) {
	t.Helper()
	e := newEngine()
	addLogs(t, e, "c1", msg)
	m := newTestManager(t, e, Config{})
	path := startCopy(t, m, "c1")
	waitLines(t, path, 1)
	return e, m, path
}

// startCopy starts copying container id's logs to a new 0.log and returns its path.
func startCopy(t *testing.T, m *Manager, id string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "0.log")
	assert.NilError(t, startAt(m, context.Background(), id, path))
	return path
}

func startAt(m *Manager, ctx context.Context, id, path string) error {
	if err := m.Record(id, LogFile{Dir: filepath.Dir(path), Name: filepath.Base(path)}); err != nil {
		return err
	}
	return m.Start(ctx, id)
}
