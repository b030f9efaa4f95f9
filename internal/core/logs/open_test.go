package logs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// openers are the two ways of opening beneath a directory: openat2, and the walk
// used where the kernel lacks it.
var openers = map[string]opener{"openat2": {}, "walk": {noOpenat2: true}}

func TestOpenLogFileCreatesAndAppends(t *testing.T) {
	for name, o := range openers {
		t.Run(name, func(t *testing.T) {
			pod := t.TempDir()
			assert.NilError(t, os.Mkdir(filepath.Join(pod, "app"), 0o755))
			lf := LogFile{Dir: pod, Name: "app/0.log"}
			for _, line := range []string{"one\n", "two\n"} {
				f, replaced, err := o.openLogFile(lf)
				assert.NilError(t, err)
				assert.Check(t, !replaced)
				_, err = f.WriteString(line)
				assert.NilError(t, err)
				assert.NilError(t, f.Close())
			}
			b, err := os.ReadFile(lf.Path())
			assert.NilError(t, err)
			assert.Equal(t, string(b), "one\ntwo\n")
			fi, err := os.Stat(lf.Path())
			assert.NilError(t, err)
			assert.Equal(t, fi.Mode().Perm()&^0o022, os.FileMode(0o640)&^0o022)
		})
	}
}

// TestOpenLogFileNeverFollowsLinks: a writer of the pod log directory cannot make us
// write anywhere else: a link in place of the container's directory is refused (the
// target untouched); a link in place of the file is replaced by a file.
func TestOpenLogFileNeverFollowsLinks(t *testing.T) {
	for name, o := range openers {
		t.Run(name, func(t *testing.T) {
			pod, elsewhere := t.TempDir(), t.TempDir()
			victim := filepath.Join(elsewhere, "0.log")
			assert.NilError(t, os.WriteFile(victim, []byte("precious\n"), 0o600))

			// The container's directory is a link to elsewhere.
			assert.NilError(t, os.Symlink(elsewhere, filepath.Join(pod, "app")))
			_, _, err := o.openLogFile(LogFile{Dir: pod, Name: "app/0.log"})
			assert.Check(t, errors.Is(err, unix.ELOOP), "got %v", err)

			// The file is a link to the victim (upstream's link to the engine's log looks
			// the same): replaced, the victim untouched.
			assert.NilError(t, os.Mkdir(filepath.Join(pod, "web"), 0o755))
			assert.NilError(t, os.Symlink(victim, filepath.Join(pod, "web", "0.log")))
			f, replaced, err := o.openLogFile(LogFile{Dir: pod, Name: "web/0.log"})
			assert.NilError(t, err)
			assert.Check(t, replaced)
			_, err = f.WriteString("ours\n")
			assert.NilError(t, err)
			assert.NilError(t, f.Close())
			fi, err := os.Lstat(filepath.Join(pod, "web", "0.log"))
			assert.NilError(t, err)
			assert.Check(t, fi.Mode().IsRegular())

			b, err := os.ReadFile(victim)
			assert.NilError(t, err)
			assert.Equal(t, string(b), "precious\n")
		})
	}
}

func TestLogFileValidate(t *testing.T) {
	for _, lf := range []LogFile{
		{Dir: "relative", Name: "a/0.log"},
		{Dir: "/pods/x", Name: ""},
		{Dir: "/pods/x", Name: "../y/0.log"},
		{Dir: "/pods/x", Name: "/etc/passwd"},
		{Dir: "/pods/x", Name: "a/../../0.log"},
	} {
		assert.Check(t, errdefs.IsInvalidArgument(lf.Validate()), "%+v", lf)
		_, _, err := (opener{}).openLogFile(lf)
		assert.Check(t, errdefs.IsInvalidArgument(err), "%+v", lf)
	}
	assert.NilError(t, LogFile{Dir: "/pods/x", Name: "a/0.log"}.Validate())
}

func TestRecordsPersist(t *testing.T) {
	state := filepath.Join(t.TempDir(), "logs")
	m := NewManager(nil, Config{StateDir: state}, nil)
	assert.Check(t, m.AdoptsLabels(), "nothing recorded on this node yet")
	lf := LogFile{Dir: "/var/log/pods/ns_pod_uid", Name: "app/0.log"}
	assert.NilError(t, m.Record("c1", lf))
	assert.NilError(t, m.Record("c2", LogFile{Dir: "/var/log/pods/ns_pod_uid", Name: "db/0.log"}))
	assert.Check(t, is.ErrorContains(m.Record("c3", LogFile{Dir: "/x", Name: "../y"}), "not below"))
	assert.Check(t, errdefs.IsInvalidArgument(m.Record("../c4", lf)))
	m.Forget("c2")

	again := NewManager(nil, Config{StateDir: state}, nil) // a restart
	assert.Check(t, !again.AdoptsLabels())
	got, ok := again.Recorded("c1")
	assert.Check(t, ok)
	assert.Equal(t, got, lf)
	_, ok = again.Recorded("c2")
	assert.Check(t, !ok, "forgotten")
	assert.Check(t, errdefs.IsNotFound(again.Start(t.Context(), "c2")))
	entries, err := os.ReadDir(state)
	assert.NilError(t, err)
	assert.Equal(t, len(entries), 1, "one record, no temporary files")
}
