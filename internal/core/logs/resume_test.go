package logs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
)

func TestManagerResume(t *testing.T) {
	sec := time.Second
	before := []logMsg{
		{at(100 * time.Millisecond), "stdout", "one\n"},
		{at(200 * time.Millisecond), "stderr", "two\n"},
		// Same second as the next ones, different nanoseconds.
		{at(sec + 100), "stdout", "three\n"},
	}
	after := []logMsg{
		{at(sec + 200), "stdout", "four\n"},
		{at(sec + 300), "stderr", "five\n"},
		{at(2 * sec), "stdout", "six\n"},
	}
	want := []string{"stdout one", "stderr two", "stdout three", "stdout four", "stderr five", "stdout six"}
	for _, ignoreSince := range []bool{false, true} {
		t.Run(fmt.Sprintf("engine ignores since %v", ignoreSince), func(t *testing.T) {
			e := newEngine()
			e.SetLogSinceIgnored(ignoreSince)
			path := filepath.Join(t.TempDir(), "0.log")
			addLogs(t, e, "c1", before...)

			m1 := NewManager(e, Config{}, testLogger(t))
			assert.NilError(t, startAt(m1, context.Background(), "c1", path))
			waitLines(t, path, len(before))
			m1.Close()

			addLogs(t, e, "c1", after...)
			finish(e, "c1")
			m2 := newTestManager(t, e, Config{})
			assert.NilError(t, startAt(m2, context.Background(), "c1", path))
			waitDone(t, m2, "c1")

			assert.DeepEqual(t, logical(readCRI(t, path)), want)
			sinces := sinces(e, "c1")
			assert.Equal(t, len(sinces), 2)
			assert.Assert(t, sinces[0].IsZero())
			assert.Assert(t, sinces[1].Equal(at(sec+100)), "resumed since %s", sinces[1])
		})
	}
}

func TestManagerResumeFile(t *testing.T) {
	t1, t2, t3 := at(1), at(2), at(3)
	tests := []struct {
		name string
		// file is what the CRI log holds when the shim starts.
		file string
		msgs []logMsg
		want string
	}{
		{
			name: "line cut after a partial chunk",
			file: crLine(t1, "stdout", "F", "a") + crLine(t2, "stdout", "P", "0123456789"),
			msgs: []logMsg{{t1, "stdout", "a\n"}, {t2, "stdout", "0123456789abcdefghij!\n"}, {t3, "stdout", "b\n"}},
			want: crLine(t1, "stdout", "F", "a") + crLine(t2, "stdout", "P", "0123456789") +
				crLine(t2, "stdout", "P", "abcdefghij") + crLine(t2, "stdout", "F", "!") + crLine(t3, "stdout", "F", "b"),
		},
		{
			name: "partial line whose rest never came",
			file: crLine(t1, "stderr", "P", "prompt$ "),
			msgs: []logMsg{{t1, "stderr", "prompt$ "}, {t2, "stdout", "later\n"}},
			want: crLine(t1, "stderr", "P", "prompt$ ") + crLine(t2, "stdout", "F", "later"),
		},
		{
			name: "partial line completed by a newline only",
			file: crLine(t1, "stderr", "P", "prompt$ "),
			msgs: []logMsg{{t1, "stderr", "prompt$ \n"}},
			want: crLine(t1, "stderr", "P", "prompt$ ") + crLine(t1, "stderr", "F", ""),
		},
		{
			name: "incomplete last line is dropped and written again",
			file: crLine(t1, "stdout", "F", "a") + crLine(t2, "stdout", "F", "b")[:20],
			msgs: []logMsg{{t1, "stdout", "a\n"}, {t2, "stdout", "b\n"}},
			want: crLine(t1, "stdout", "F", "a") + crLine(t2, "stdout", "F", "b"),
		},
		{
			name: "empty file",
			file: "",
			msgs: []logMsg{{t1, "stdout", "a\n"}},
			want: crLine(t1, "stdout", "F", "a"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine()
			e.SetLogSinceIgnored(true)
			addLogs(t, e, "c1", tc.msgs...)
			finish(e, "c1")
			path := filepath.Join(t.TempDir(), "0.log")
			assert.NilError(t, os.WriteFile(path, []byte(tc.file), 0o640))

			m := newTestManager(t, e, Config{MaxLineSize: 10})
			assert.NilError(t, startAt(m, context.Background(), "c1", path))
			waitDone(t, m, "c1")
			assert.Equal(t, readFile(t, path), tc.want)
			readCRI(t, path)
		})
	}
}

func TestManagerResumeAfterRotation(t *testing.T) {
	// The shim restarts after kubelet rotated the log and before anything was written
	// to the new file: the rotated file tells where to resume.
	e := newEngine()
	addLogs(t, e, "c1", logMsg{at(1), "stdout", "old\n"}, logMsg{at(2), "stdout", "new\n"})
	finish(e, "c1")
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	rotated := crLine(at(1), "stdout", "F", "old")
	assert.NilError(t, os.WriteFile(path+".20240501-100000", []byte("older"), 0o640))
	assert.NilError(t, os.WriteFile(path+".20240501-100001", []byte(rotated), 0o640))
	assert.NilError(t, os.WriteFile(path+".20240501-100002.gz", []byte("gzip"), 0o640))

	m := newTestManager(t, e, Config{})
	assert.NilError(t, startAt(m, context.Background(), "c1", path))
	waitDone(t, m, "c1")
	assert.Equal(t, readFile(t, path), crLine(at(2), "stdout", "F", "new"))
}

func TestManagerReopen(t *testing.T) {
	e := newEngine()
	m := newTestManager(t, e, Config{})
	path := filepath.Join(t.TempDir(), "0.log")
	addLogs(t, e, "c1", logMsg{at(1), "stdout", "a\n"}, logMsg{at(2), "stderr", "b\n"})
	assert.NilError(t, startAt(m, context.Background(), "c1", path))
	waitLines(t, path, 2)

	// kubelet's rotation: rename, then ReopenContainerLog.
	rotated := path + ".20240501-100000"
	assert.NilError(t, os.Rename(path, rotated))
	assert.NilError(t, m.Reopen("c1"))
	addLogs(t, e, "c1", logMsg{at(3), "stdout", "c\n"}, logMsg{at(4), "stdout", "d\n"})
	finish(e, "c1")
	waitDone(t, m, "c1")

	assert.DeepEqual(t, logical(readCRI(t, rotated)), []string{"stdout a", "stderr b"})
	assert.DeepEqual(t, logical(readCRI(t, path)), []string{"stdout c", "stdout d"})

	// The copier reached the end: nothing to reopen.
	assert.Assert(t, errdefs.IsFailedPrecondition(m.Reopen("c1")))
	assert.Assert(t, errdefs.IsFailedPrecondition(m.Reopen("unknown")))
}

func TestManagerReplacesSymlink(t *testing.T) {
	// Upstream cri-dockerd links the CRI log path to the engine's json-file log.
	dir := t.TempDir()
	engineLog := filepath.Join(dir, "c1-json.log")
	jsonLine := `{"log":"a\n","stream":"stdout","time":"2024-05-01T10:00:00.000000001Z"}` + "\n"
	assert.NilError(t, os.WriteFile(engineLog, []byte(jsonLine), 0o640))
	path := filepath.Join(dir, "0.log")
	assert.NilError(t, os.Symlink(engineLog, path))

	e := newEngine()
	addLogs(t, e, "c1", logMsg{at(1), "stdout", "a\n"})
	finish(e, "c1")
	m := newTestManager(t, e, Config{})
	assert.NilError(t, startAt(m, context.Background(), "c1", path))
	waitDone(t, m, "c1")

	assert.Equal(t, readFile(t, engineLog), jsonLine, "engine log untouched")
	fi, err := os.Lstat(path)
	assert.NilError(t, err)
	assert.Assert(t, fi.Mode().IsRegular())
	assert.Equal(t, readFile(t, path), crLine(at(1), "stdout", "F", "a"))
}
