package logs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
	"github.com/dockpin/cri-dockerd/internal/core/docker/dockertest"
)

// base is the time the test containers log from.
var base = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)

// at returns base plus d.
func at(d time.Duration) time.Time { return base.Add(d) }

// engineTime formats a timestamp as the engine does with timestamps on.
func engineTime(ts time.Time) string {
	return ts.UTC().Format("2006-01-02T15:04:05.000000000Z07:00")
}

// --- kubelet's reading of CRI logs -------------------------------------------------

// kubeletMsg is one line of a CRI log as kubelet reads it.
type kubeletMsg struct {
	ts      time.Time
	stream  string
	partial bool
	// log is the content kubelet passes on: with the newline for a full line, without
	// for a partial one.
	log string
}

// parseLikeKubelet parses one CRI log line (with its newline) by the rules of
// kubelet's CRI log reader: a lenient RFC 3339 timestamp, a space, "stdout" or
// "stderr", a space, tags separated by ':' whose first is P (partial) or otherwise
// full, a space, and the content; a partial line loses its newline. It is stricter
// than kubelet in one point: the first tag must be P or F.
func parseLikeKubelet(line []byte) (kubeletMsg, error) {
	var m kubeletMsg
	i := bytes.IndexByte(line, ' ')
	if i < 0 {
		return m, fmt.Errorf("timestamp is not found")
	}
	ts, err := time.Parse("2006-01-02T15:04:05.999999999Z07:00", string(line[:i]))
	if err != nil {
		return m, fmt.Errorf("unexpected timestamp: %w", err)
	}
	m.ts = ts
	line = line[i+1:]
	i = bytes.IndexByte(line, ' ')
	if i < 0 {
		return m, fmt.Errorf("stream type is not found")
	}
	m.stream = string(line[:i])
	if m.stream != "stdout" && m.stream != "stderr" {
		return m, fmt.Errorf("unexpected stream type %q", m.stream)
	}
	line = line[i+1:]
	i = bytes.IndexByte(line, ' ')
	if i < 0 {
		return m, fmt.Errorf("log tag is not found")
	}
	tags := strings.Split(string(line[:i]), ":")
	switch tags[0] {
	case "P":
		m.partial = true
		if len(line) > 0 && line[len(line)-1] == '\n' {
			line = line[:len(line)-1]
		}
	case "F":
	default:
		return m, fmt.Errorf("unexpected tag %q", tags[0])
	}
	m.log = string(line[i+1:])
	return m, nil
}

// parseCRIText checks that every line of a CRI log parses as kubelet reads it.
func parseCRIText(t *testing.T, text string) []kubeletMsg {
	t.Helper()
	if text == "" {
		return nil
	}
	assert.Assert(t, strings.HasSuffix(text, "\n"), "log does not end with a newline: %q", text)
	var msgs []kubeletMsg
	for _, line := range strings.SplitAfter(text, "\n") {
		if line == "" {
			continue
		}
		m, err := parseLikeKubelet([]byte(line))
		assert.NilError(t, err, "line %q", line)
		msgs = append(msgs, m)
	}
	return msgs
}

// readCRI reads a CRI log file, checking every line parses.
func readCRI(t *testing.T, path string) []kubeletMsg {
	t.Helper()
	b, err := os.ReadFile(path)
	assert.NilError(t, err)
	return parseCRIText(t, string(b))
}

// logical joins partial lines with what follows them on the same stream, as a reader
// of kubelet's output sees them: "<stream> <content>" per line.
func logical(msgs []kubeletMsg) []string {
	pending := map[string]string{}
	var out []string
	for _, m := range msgs {
		if m.partial {
			pending[m.stream] += m.log
			continue
		}
		out = append(out, m.stream+" "+pending[m.stream]+strings.TrimSuffix(m.log, "\n"))
		delete(pending, m.stream)
	}
	for _, s := range []string{"stdout", "stderr"} {
		if p, ok := pending[s]; ok {
			out = append(out, s+" "+p+" <no newline>")
		}
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	assert.NilError(t, err)
	return string(b)
}

// waitLines waits until the file at path holds n lines.
func waitLines(t *testing.T, path string, n int) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		b, err := os.ReadFile(path)
		if err != nil {
			return poll.Continue("%v", err)
		}
		if got := bytes.Count(b, []byte{'\n'}); got != n {
			return poll.Continue("%d lines of %d", got, n)
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Second), poll.WithDelay(5*time.Millisecond))
}

// --- the engine -------------------------------------------------------------------

// logMsg is one message of a container's engine log.
type logMsg struct {
	ts     time.Time
	stream string
	// line is the content as the engine sends it after "<timestamp> ", normally
	// ending in a newline (the engine's partial messages do not).
	line string
}

var errEngineDown = fmt.Errorf("engine connection reset: %w", errdefs.ErrUnavailable)

// newEngine returns a fake engine holding the image "busybox".
func newEngine() *dockertest.Fake {
	e := dockertest.New()
	e.AddImage(dockertest.Image(1, "busybox:latest"))
	return e
}

// addLogs adds msgs to the log of container name, which runs (created when missing).
func addLogs(t *testing.T, e *dockertest.Fake, name string, msgs ...logMsg) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.InspectContainer(ctx, name); errdefs.IsNotFound(err) {
		id, err := e.CreateContainer(ctx, docker.ContainerSpec{Name: name, Image: "busybox"})
		assert.NilError(t, err)
		assert.NilError(t, e.StartContainer(ctx, id))
	}
	for _, m := range msgs {
		e.AppendLogData(name, m.stream, m.line, m.ts)
	}
}

// finish makes container name exit: its log ends.
func finish(e *dockertest.Fake, name string) {
	e.SetContainerState(name, docker.StateExited, 0)
}

// sinces returns the Since of every log request for container name.
func sinces(e *dockertest.Fake, name string) []time.Time {
	var out []time.Time
	for _, r := range e.LogsRequests(name) {
		out = append(out, r.Since)
	}
	return out
}
