//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// preloadFile is one file of `crictl info`'s .pinning.preloaded.
type preloadFile struct {
	Tarball string            `json:"tarball"`
	Refs    []string          `json:"refs"`
	Failed  string            `json:"failed"`
	Origin  string            `json:"origin"`
	Kind    string            `json:"kind"`
	State   string            `json:"state"`
	Skipped bool              `json:"skipped"`
	Images  map[string]string `json:"images"`
}

// preloadStatus is what verbose Status says of the preload directory.
type preloadStatus struct {
	Files []preloadFile `json:"preloaded"`
	Dir   struct {
		Loaded  int `json:"loadedThisStart"`
		Skipped int `json:"skippedThisStart"`
	} `json:"preloadDir"`
}

func (p preloadStatus) file(name string) preloadFile {
	for _, f := range p.Files {
		if f.Tarball == name {
			return f
		}
	}
	return preloadFile{}
}

// preloadInfo reads the preload directory's state through verbose Status.
func (s *shim) preloadInfo(t testing.TB) preloadStatus {
	t.Helper()
	var out preloadStatus
	s.pinningInfo(t, &out)
	return out
}

// waitPreload polls verbose Status until ok says the preload state is as wanted.
func waitPreload(t *testing.T, s *shim, timeout time.Duration, ok func(preloadStatus) string) preloadStatus {
	t.Helper()
	var last preloadStatus
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		last = s.preloadInfo(t)
		if why := ok(last); why != "" {
			return poll.Continue("%s: %+v", why, last.Files)
		}
		return poll.Success()
	}, poll.WithTimeout(timeout), poll.WithDelay(200*time.Millisecond))
	return last
}

func fileState(name, state string) func(preloadStatus) string {
	return func(p preloadStatus) string {
		if got := p.file(name).State; got != state {
			return fmt.Sprintf("%s is %q, want %q", name, got, state)
		}
		return ""
	}
}

// saveImage makes a distinct image tagged tag, saves it to path and removes it from
// the engine; it returns its ID (the image is removed again when the test ends).
func saveImage(t *testing.T, tag, path string) string {
	t.Helper()
	id := importImage(t, tag)
	docker(t, "save", "-o", path, tag)
	docker(t, "rmi", tag)
	return id
}

// engineImage tells whether the engine has ref.
func engineImage(ref string) bool {
	_, err := dockerErr(nil, "image", "inspect", ref)
	return err == nil
}

// TestPreloadListPullsAndPins: a .txt list in the preload directory names an image of
// the local registry: it is pulled at start and pinned, with the list as the reason.
func TestPreloadListPullsAndPins(t *testing.T) {
	ref := env.registry + "/" + env.store + "/preload-list:1"
	importImage(t, ref)
	docker(t, "push", ref)
	docker(t, "rmi", ref)
	removeAtEnd(t, ref)
	dir := t.TempDir()
	list := "# images of this node\n\n" + ref + "   # the app\n"
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "images.txt"), []byte(list), 0o644))

	s := startShim(t, "--preload-images-dir", dir)
	st := waitPreload(t, s, time.Minute, fileState("images.txt", "loaded"))
	assert.DeepEqual(t, st.file("images.txt").Refs, []string{ref})
	assert.Equal(t, st.file("images.txt").Images[ref], "present")
	waitListPinned(t, s, imageID(t, ref), true)
	inspect := s.crictl(t, "inspecti", "-o", "json", ref)
	assert.Check(t, strings.Contains(inspect, "images.txt: "+ref), inspect)
}

// registryProcess is a distribution registry of the test's own, on its own port, that
// the test stops and starts.
type registryProcess struct {
	addr, config string
	cmd          *exec.Cmd
}

func newRegistry(t *testing.T) *registryProcess {
	t.Helper()
	dir := t.TempDir()
	r := &registryProcess{addr: "127.0.0.1:" + strconv.Itoa(freePort(t)), config: filepath.Join(dir, "config.yml")}
	cfg := fmt.Sprintf("version: 0.1\nlog: {level: warn, accesslog: {disabled: true}}\n"+
		"storage:\n  filesystem: {rootdirectory: %s}\nhttp:\n  addr: %s\n  secret: dockpin-e2e\n", filepath.Join(dir, "data"), r.addr)
	assert.NilError(t, os.WriteFile(r.config, []byte(cfg), 0o644))
	t.Cleanup(r.stop)
	return r
}

func (r *registryProcess) start(t *testing.T) {
	t.Helper()
	r.cmd = exec.Command(filepath.Join(filepath.Dir(env.crictl), "registry"), "serve", r.config)
	r.cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none")
	assert.NilError(t, r.cmd.Start())
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		resp, err := http.Get("http://" + r.addr + "/v2/")
		if err != nil {
			return poll.Continue("registry not up: %v", err)
		}
		_ = resp.Body.Close()
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(100*time.Millisecond))
}

func (r *registryProcess) stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	_ = r.cmd.Wait()
	r.cmd = nil
}

// TestPreloadListRegistryDownAtStart: the registry a list names is down when we start:
// the pull fails and is retried (Status says why), the reference is pinned all along,
// and the image is pulled once the registry comes up, without a restart of ours.
func TestPreloadListRegistryDownAtStart(t *testing.T) {
	reg := newRegistry(t)
	reg.start(t)
	ref := reg.addr + "/e2e/preload-later:1"
	importImage(t, ref)
	docker(t, "push", ref)
	docker(t, "rmi", ref)
	removeAtEnd(t, ref)
	reg.stop()

	dir := t.TempDir()
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "later.txt"), []byte(ref+"\n"), 0o644))
	s := startShim(t, "--preload-images-dir", dir)
	st := waitPreload(t, s, time.Minute, func(p preloadStatus) string {
		if !strings.HasPrefix(p.file("later.txt").Images[ref], "failed: ") {
			return "the pull has not failed yet"
		}
		return ""
	})
	f := st.file("later.txt")
	assert.Check(t, f.State == "pending" && f.Failed != "", "%+v", f)
	assert.DeepEqual(t, f.Refs, []string{ref})
	assert.Check(t, !engineImage(ref))

	reg.start(t) // the registry comes up: the next retry (at most 30 s later) pulls
	waitPreload(t, s, 90*time.Second, fileState("later.txt", "loaded"))
	waitListPinned(t, s, imageID(t, ref), true)
}

// TestPreloadDirWatched: while we run, an archive copied into the directory (slowly,
// in two writes) is loaded once complete and pinned, one renamed into place too, and
// one removed is unpinned.
func TestPreloadDirWatched(t *testing.T) {
	dir, staging := t.TempDir(), t.TempDir()
	a := saveImage(t, "e2e/preload-watch-a:1", filepath.Join(staging, "a.tar"))
	b := saveImage(t, "e2e/preload-watch-b:1", filepath.Join(staging, "b.tar"))
	s := startShim(t, "--preload-images-dir", dir)

	// A slow copy: the first half, a pause shorter than the settle time, the rest.
	raw, err := os.ReadFile(filepath.Join(staging, "a.tar"))
	assert.NilError(t, err)
	f, err := os.Create(filepath.Join(dir, "a.tar"))
	assert.NilError(t, err)
	_, err = f.Write(raw[:len(raw)/2])
	assert.NilError(t, err)
	time.Sleep(300 * time.Millisecond) // a copy in progress, not an assertion
	_, err = f.Write(raw[len(raw)/2:])
	assert.NilError(t, err)
	assert.NilError(t, f.Close())
	waitPreload(t, s, time.Minute, fileState("a.tar", "loaded"))
	waitListPinned(t, s, a, true)
	assert.Check(t, !strings.Contains(s.log(t), "tarball not loaded"), "the half-written archive must not be loaded")

	// Written under a dotfile name, renamed into place.
	tmp := filepath.Join(dir, ".b.tar")
	raw, err = os.ReadFile(filepath.Join(staging, "b.tar"))
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(tmp, raw, 0o644))
	assert.NilError(t, os.Rename(tmp, filepath.Join(dir, "b.tar")))
	waitPreload(t, s, time.Minute, fileState("b.tar", "loaded"))
	waitListPinned(t, s, b, true)
	assert.Equal(t, s.preloadInfo(t).Dir.Loaded, 2)

	assert.NilError(t, os.Remove(filepath.Join(dir, "a.tar")))
	waitListPinned(t, s, a, false)
	assert.Check(t, s.preloadInfo(t).file("a.tar").Tarball == "", "a removed file is no longer listed")
	got, err := s.listPinned(context.Background())
	assert.NilError(t, err)
	assert.Check(t, got[b], "b.tar is still there")
}

// TestPreloadDoesNotBlockStart: with a large archive to load, the socket answers
// first; an ImageStatus for the archive's image waits for the load and answers the
// image present, pinned.
func TestPreloadDoesNotBlockStart(t *testing.T) {
	dir := t.TempDir()
	const tag = "e2e/preload-big:1"
	id := bigPreloadArchive(t, dir, tag)

	s := startShim(t, "--preload-images-dir", dir)
	st := s.preloadInfo(t)
	assert.Equal(t, st.file("big.tar").State, "pending", "the socket answers before the archive is loaded")
	resp, err := s.img.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: tag}})
	assert.NilError(t, err)
	assert.Equal(t, resp.GetImage().GetId(), id, "ImageStatus waits for the pending archive, then answers the image present")
	assert.Check(t, resp.GetImage().GetPinned())
	assert.Check(t, strings.Contains(s.log(t), "waiting for the preload file that provides it"))
	assert.Equal(t, s.preloadInfo(t).file("big.tar").State, "loaded")
}

// TestPreloadRestartSkipsLoadedArchives: 20 archives loaded at one start are not
// loaded again at the next (same content digest, images present): the engine sees no
// load at all, and every image is pinned again.
func TestPreloadRestartSkipsLoadedArchives(t *testing.T) {
	const n = 20
	dir := t.TempDir()
	ids := make([]string, n)
	for i := range n {
		ids[i] = saveImage(t, fmt.Sprintf("e2e/preload-many-%02d:1", i), filepath.Join(dir, fmt.Sprintf("img-%02d.tar", i)))
	}
	allLoaded := func(p preloadStatus) string {
		for _, f := range p.Files {
			if f.State != "loaded" {
				return f.Tarball + " is " + f.State
			}
		}
		if len(p.Files) != n {
			return fmt.Sprintf("%d files", len(p.Files))
		}
		return ""
	}
	since := time.Now().Add(-time.Second)
	s := startShim(t, "--preload-images-dir", dir)
	st := waitPreload(t, s, 3*time.Minute, allLoaded)
	assert.Equal(t, st.Dir.Loaded, n)
	assert.Check(t, engineLoads(t, since) >= n, "the first start loads every archive")
	s.stop(t)

	since = time.Now()
	s.restart(t)
	st = waitPreload(t, s, time.Minute, allLoaded)
	assert.Equal(t, st.Dir.Loaded, 0)
	assert.Equal(t, st.Dir.Skipped, n)
	for _, f := range st.Files {
		assert.Check(t, f.Skipped, "%+v", f)
	}
	for _, id := range ids {
		waitListPinned(t, s, id, true)
	}
	assert.Equal(t, engineLoads(t, since), 0, "the restart loads nothing")
}

// engineLoads counts the engine's image load events since then.
func engineLoads(t *testing.T, since time.Time) int {
	t.Helper()
	stamp := func(t time.Time) string { return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond()) }
	out := docker(t, "events", "--since", stamp(since), "--until", stamp(time.Now()),
		"--filter", "type=image", "--filter", "event=load", "--format", "{{.ID}}")
	if strings.TrimSpace(out) == "" {
		return 0
	}
	return len(strings.Split(strings.TrimSpace(out), "\n"))
}

// TestPreloadFirstStartNeverFailsOpen: at a first start (nothing saved), a large plain
// archive in the directory whose image the engine already has: from the launch until
// the archive is loaded, ListImages (a new connection each time, every 20 ms) lists
// the image pinned (every image while the archive is unread, then by its manifest),
// never unpinned, and is never refused.
func TestPreloadFirstStartNeverFailsOpen(t *testing.T) {
	dir := t.TempDir()
	const tag = "e2e/preload-first:1"
	_, err := dockerErr(bigRootfsTar(t, 128<<20), "import", "-", tag)
	assert.NilError(t, err)
	id := imageID(t, tag)
	removeAtEnd(t, id)
	docker(t, "save", "-o", filepath.Join(dir, "first.tar"), tag)
	s := launchBinary(t, env.binary, "", "--preload-images-dir", dir)
	refused, pinned, down := 0, 0, 0
	deadline := time.Now().Add(5 * time.Minute)
	for {
		assert.Assert(t, time.Now().Before(deadline), "first.tar not loaded after 5 minutes")
		got, err := listPinnedFresh(s.endpoint)
		switch {
		case err == nil && !got[id]:
			t.Fatalf("the image of first.tar is listed unpinned before the archive was loaded")
		case err == nil:
			pinned++
		case pinned == 0 && !freshServes(s.endpoint):
			down++ // not serving yet
		default:
			refused++
			t.Errorf("ListImages refused at a first start: %v", err)
		}
		if pinned+refused > 0 && s.preloadInfo(t).file("first.tar").State == "loaded" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("until first.tar was loaded: %d ListImages refused, %d with the image pinned (%d before the socket served)", refused, pinned, down)
	waitListPinned(t, s, id, true)
}
