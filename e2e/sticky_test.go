//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	contentapi "github.com/containerd/containerd/api/services/content/v1"
	leasesapi "github.com/containerd/containerd/api/services/leases/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// stickyLabel marks the images of the sticky tests, so prunes touch only them.
const stickyLabel = "e2e.sticky"

var (
	citoolOnce sync.Once
	citoolBin  string
)

// stickyImage makes a runnable image tagged tag (citool as /citool and as /pause,
// ENTRYPOINT /pause, a unique file) with the config label stickyLabel=1 and labels;
// it is removed when the test ends.
func stickyImage(t *testing.T, tag string, labels ...string) string {
	t.Helper()
	citoolOnce.Do(func() {
		citoolBin = filepath.Join(env.stackDir, "sticky-citool")
		cmd := exec.Command("go", "build", "-trimpath", "-o", citoolBin, "./hack/critest/citool")
		cmd.Dir, cmd.Env = env.root, append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		assert.NilError(t, err, string(out))
	})
	bin, err := os.ReadFile(citoolBin)
	assert.NilError(t, err)
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		body []byte
		mode int64
	}{{"citool", bin, 0o755}, {"pause", bin, 0o755}, {"image-name", []byte(tag + " " + hex.EncodeToString(nonce)), 0o644}} {
		assert.NilError(t, tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body))}))
		_, err := tw.Write(f.body)
		assert.NilError(t, err)
	}
	assert.NilError(t, tw.Close())
	args := []string{"import", "-c", `ENTRYPOINT ["/pause"]`, "-c", "LABEL " + stickyLabel + "=1"}
	for _, l := range labels {
		args = append(args, "-c", "LABEL "+l)
	}
	_, err = dockerErr(buf.Bytes(), append(args, "-", tag)...)
	assert.NilError(t, err)
	id := imageID(t, tag)
	removeAtEnd(t, id)
	return id
}

// ctrdCall is a context for a call to the engine's containerd in its namespace.
func ctrdCall() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	return metadata.AppendToOutgoingContext(ctx, "containerd-namespace", "moby"), cancel
}

// leased returns the content the sticky lease holds, with each blob's size (-1 when
// the store no longer has it), read with containerd's API (ctr lists leases, not
// their resources).
func leased(t *testing.T, s *shim) map[string]int64 {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+containerdSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	assert.NilError(t, err)
	defer conn.Close()
	ctx, cancel := ctrdCall()
	defer cancel()
	resp, err := leasesapi.NewLeasesClient(conn).ListResources(ctx, &leasesapi.ListResourcesRequest{ID: s.leaseOf(t)})
	out := map[string]int64{}
	if status.Code(err) == codes.NotFound {
		return out // not taken yet (the first reconcile waits for the preload files) or deleted: holds nothing
	}
	assert.NilError(t, err)
	content := contentapi.NewContentClient(conn)
	for _, r := range resp.GetResources() {
		if r.GetType() != "content" {
			continue
		}
		out[r.GetID()] = -1
		if info, err := content.Info(ctx, &contentapi.InfoRequest{Digest: r.GetID()}); err == nil {
			out[r.GetID()] = info.GetInfo().GetSize()
		}
	}
	return out
}

func leasedBytes(l map[string]int64) int64 {
	var n int64
	for _, s := range l {
		n += max(s, 0)
	}
	return n
}

// waitLeased waits until the lease holds image id's target (want) or not.
func waitLeased(t *testing.T, s *shim, id string, want bool) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if _, ok := leased(t, s)[id]; ok != want {
			return poll.Continue("lease holds %s: %v, want %v", id, ok, want)
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(100*time.Millisecond))
}

// stickyState is the sticky pins' state in verbose Status.
type stickyState struct {
	Restore bool   `json:"restore"`
	Lease   string `json:"lease"`
	State   struct {
		LeasedBlobs int       `json:"leasedBlobs"`
		LeasedBytes int64     `json:"leasedBytes"`
		Restored    int       `json:"restored"`
		LastSync    time.Time `json:"lastSync"`
	} `json:"state"`
}

func (s *shim) sticky(t *testing.T) stickyState {
	t.Helper()
	var info struct {
		Sticky stickyState `json:"sticky"`
	}
	s.pinningInfo(t, &info)
	return info.Sticky
}

// waitSynced waits until the sticky keeper has reconciled after now, so what it
// would restore it has.
func waitSynced(t *testing.T, s *shim) {
	t.Helper()
	after := time.Now()
	s.signal(t, syscall.SIGHUP) // a reload triggers a reconcile
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if st := s.sticky(t); !st.State.LastSync.After(after) {
			return poll.Continue("last sync %v, not after %v", st.State.LastSync, after)
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(100*time.Millisecond))
}

// restoreTimes are how long after a delete started the image was back in the
// engine (docker image inspect) and listed pinned by the CRI (whose image cache
// re-reads the engine up to its settle delay, 1 s, after the delete's events).
type restoreTimes struct{ engine, cri time.Duration }

func (r restoreTimes) String() string {
	return fmt.Sprintf("engine %v, CRI %v", r.engine.Round(time.Millisecond), r.cri.Round(time.Millisecond))
}

// waitRestored waits until image id is back in the engine and listed pinned.
func waitRestored(t *testing.T, s *shim, id string, start time.Time) restoreTimes {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if imageGone(id) {
			return poll.Continue("image %s not back", id)
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(5*time.Millisecond))
	r := restoreTimes{engine: time.Since(start)}
	waitListPinned(t, s, id, true)
	r.cri = time.Since(start)
	return r
}

func imageGone(ref string) bool {
	_, err := dockerErr(nil, "image", "inspect", ref)
	return err != nil
}

var restoreLogLine = regexp.MustCompile(`pinned image restored after its delete.*duration=([0-9.]+[µmn]?s).*record="?([^ "]+)`)

// serverRestoreTimes are the delete-to-restored durations our binary logged, by record.
func serverRestoreTimes(log string) map[string][]string {
	out := map[string][]string{}
	for _, line := range strings.Split(log, "\n") {
		if m := restoreLogLine.FindStringSubmatch(line); m != nil {
			out[m[2]] = append(out[m[2]], m[1])
		}
	}
	return out
}

// TestStickyRestoreContainerd: on the containerd image store, a pinned image of every
// pin source deleted by docker rmi, docker image prune -a, docker system prune -a and
// ctr images rm is listed again, pinned, from the content the lease holds, and pods
// start from the restored images without any registry.
func TestStickyRestoreContainerd(t *testing.T) {
	requireContainerdStore(t)
	pauseImage(t)
	pinsFile := filepath.Join(t.TempDir(), "pins")
	assert.NilError(t, os.WriteFile(pinsFile, []byte("e2e/sticky-file:1\n"), 0o644))
	type pinned struct{ source, ref, id string }
	imgs := []*pinned{
		{source: "pattern", ref: "e2e/sticky-pattern:1"},
		{source: "pins-file", ref: "e2e/sticky-file:1"},
		{source: "config-label", ref: "e2e/sticky-config:1"},
		{source: "record-label", ref: "e2e/sticky-record:1"},
		{source: "sandbox-image", ref: "e2e/sticky-sandbox:1"},
	}
	for _, p := range imgs {
		var labels []string
		if p.source == "config-label" {
			labels = append(labels, pinLabel+"=pinned")
		}
		p.id = stickyImage(t, p.ref, labels...)
	}
	s := startShim(t, "--restore-pinned-images=true", "--pinned-images", "e2e/sticky-pattern:1",
		"--pinned-images-file", pinsFile, "--pod-infra-container-image", "e2e/sticky-sandbox:1")
	ctr(t, "images", "label", "docker.io/e2e/sticky-record:1", pinLabel+"=pinned")
	for _, p := range imgs {
		waitListPinned(t, s, p.id, true)
		waitLeased(t, s, p.id, true)
	}
	waitSynced(t, s) // the records are remembered
	l := leased(t, s)
	t.Logf("STICKY lease %s holds %d blobs, %d bytes (status: %d blobs, %d bytes)", s.leaseOf(t), len(l), leasedBytes(l),
		s.sticky(t).State.LeasedBlobs, s.sticky(t).State.LeasedBytes)

	filter := "label=" + stickyLabel + "=1"
	paths := []struct {
		name   string
		each   bool // one deletion per image, else one for all
		remove func(ref string)
	}{
		{"docker rmi", true, func(ref string) { docker(t, "rmi", ref) }},
		{"ctr images rm", true, func(ref string) { ctr(t, "images", "rm", "docker.io/"+ref) }},
		{"docker image prune -a", false, func(string) { docker(t, "image", "prune", "-a", "-f", "--filter", filter) }},
		{"docker system prune -a", false, func(string) { docker(t, "system", "prune", "-a", "-f", "--filter", filter) }},
	}
	for _, path := range paths {
		if !path.each {
			start := time.Now()
			path.remove("")
			for _, p := range imgs {
				d := waitRestored(t, s, p.id, start)
				t.Logf("STICKY restore store=%s path=%q source=%s: back after the delete started: %v", env.store, path.name, p.source, d)
			}
			continue
		}
		for _, p := range imgs {
			start := time.Now()
			path.remove(p.ref)
			d := waitRestored(t, s, p.id, start)
			t.Logf("STICKY restore store=%s path=%q source=%s: back after the delete started: %v", env.store, path.name, p.source, d)
		}
	}
	for rec, ds := range serverRestoreTimes(s.log(t)) {
		t.Logf("STICKY server-side delete->restored %s: %s", rec, strings.Join(ds, " "))
	}
	assert.Check(t, strings.Contains(docker(t, "image", "inspect", "--format", "{{json .Config.Labels}}", "e2e/sticky-config:1"), "pinned"))
	assert.Check(t, strings.Contains(ctr(t, "images", "ls", "name==docker.io/e2e/sticky-record:1"), pinLabel+"=pinned"), "the record label comes back with the record")

	// Pods start from the restored images; nothing can be pulled (no registry has them).
	pod := podConfig("sticky")
	podID := runPod(t, s, pod)
	t.Cleanup(func() { stopAndRemovePod(t, s, podID) })
	for i, p := range imgs {
		c := httpdContainer("c-"+p.source, fmt.Sprint(18100+i), "")
		c.Image.Image = p.ref
		cid := startContainer(t, s, podID, pod, c)
		st, err := s.rt.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: cid})
		assert.NilError(t, err)
		assert.Check(t, st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING, "%s: %v", p.source, st.GetStatus().GetState())
	}
}

// TestStickyUnpinThenDelete: once unpinned (record label removed, pattern dropped
// from the pins file) an image leaves the lease, can be deleted and stays deleted.
func TestStickyUnpinThenDelete(t *testing.T) {
	requireContainerdStore(t)
	pinsFile := filepath.Join(t.TempDir(), "pins")
	assert.NilError(t, os.WriteFile(pinsFile, []byte("e2e/sticky-unpin-file:1\n"), 0o644))
	rec := stickyImage(t, "e2e/sticky-unpin-record:1")
	file := stickyImage(t, "e2e/sticky-unpin-file:1")
	s := startShim(t, "--restore-pinned-images=true", "--pinned-images-file", pinsFile)
	ctr(t, "images", "label", "docker.io/e2e/sticky-unpin-record:1", pinLabel+"=pinned")
	waitLeased(t, s, rec, true)
	waitLeased(t, s, file, true)

	ctr(t, "images", "label", "docker.io/e2e/sticky-unpin-record:1", pinLabel+"=")
	waitLeased(t, s, rec, false)
	docker(t, "rmi", "e2e/sticky-unpin-record:1")

	assert.NilError(t, os.WriteFile(pinsFile, nil, 0o644))
	s.signal(t, syscall.SIGHUP)
	waitListPinned(t, s, file, false)
	waitLeased(t, s, file, false)
	ctr(t, "images", "rm", "docker.io/e2e/sticky-unpin-file:1")

	waitSynced(t, s)
	assert.Check(t, imageGone("e2e/sticky-unpin-record:1"), "unpinned and deleted: it must stay deleted")
	assert.Check(t, imageGone("e2e/sticky-unpin-file:1"), "unpinned and deleted: it must stay deleted")
	for d, size := range leased(t, s) {
		assert.Check(t, d != rec && d != file, "the lease still holds %s (%d bytes)", d, size)
	}
}

// TestStickyCrictlRmi: crictl rmi of a pinned image fails naming the pin and how to
// unpin; with --restore-pinned-images=false it removes the image.
func TestStickyCrictlRmi(t *testing.T) {
	id := stickyImage(t, "e2e/sticky-rmi:1")
	s := startShim(t, "--restore-pinned-images=true", "--pinned-images", "e2e/sticky-rmi:1")
	cmd := exec.Command(env.crictl, "--runtime-endpoint", s.endpoint, "--image-endpoint", s.endpoint, "rmi", "e2e/sticky-rmi:1")
	cmd.Env = append(os.Environ(), "CRI_CONFIG_FILE=/dev/null")
	out, err := cmd.CombinedOutput()
	assert.Check(t, err != nil, "crictl rmi of a pinned image must fail: %s", out)
	assert.Check(t, strings.Contains(string(out), "FailedPrecondition") && strings.Contains(string(out), "pinned-images: e2e/sticky-rmi:1") &&
		strings.Contains(string(out), "--restore-pinned-images=false"), "%s", out)
	assert.Check(t, !imageGone(id))
	s.stop(t)

	s = startShim(t, "--restore-pinned-images=false", "--pinned-images", "e2e/sticky-rmi:1")
	s.crictl(t, "rmi", "e2e/sticky-rmi:1")
	assert.Check(t, imageGone(id))
}

// TestStickyPreloaded: on both stores, a preloaded image deleted by docker rmi,
// docker image prune -a, docker system prune -a (and ctr images rm on the containerd
// store, where its record carries the pin label and its archive's name) comes back:
// from the leased content on the containerd store, by loading its archive again on
// the classic one. Once its archive is removed it can be deleted for good.
func TestStickyPreloaded(t *testing.T) {
	dir := t.TempDir()
	id := stickyImage(t, "e2e/sticky-preload:1")
	docker(t, "save", "-o", filepath.Join(dir, "sticky.tar"), "e2e/sticky-preload:1")
	docker(t, "rmi", "e2e/sticky-preload:1")
	pauseImage(t)

	s := startShim(t, "--restore-pinned-images=true", "--preload-images-dir", dir, "--pod-infra-container-image", pauseRef)
	waitListPinned(t, s, id, true)
	waitSynced(t, s) // the image is remembered
	if env.store == "containerd" {
		waitLeased(t, s, id, true)
		poll.WaitOn(t, func(poll.LogT) poll.Result {
			ls := ctr(t, "images", "ls", "name==docker.io/e2e/sticky-preload:1")
			if !strings.Contains(ls, "io.dockpin.preload.archive=sticky.tar") || !strings.Contains(ls, pinLabel+"=pinned") {
				return poll.Continue("record labels: %s", ls)
			}
			return poll.Success()
		}, poll.WithTimeout(30*time.Second))
	}
	filter := "label=" + stickyLabel + "=1"
	paths := []struct {
		path string
		fn   func()
	}{
		{"docker rmi", func() { docker(t, "rmi", "e2e/sticky-preload:1") }},
		{"docker image prune -a", func() { docker(t, "image", "prune", "-a", "-f", "--filter", filter) }},
		{"docker system prune -a", func() { docker(t, "system", "prune", "-a", "-f", "--filter", filter) }},
	}
	if env.store == "containerd" {
		paths = append(paths, struct {
			path string
			fn   func()
		}{"ctr images rm", func() { ctr(t, "images", "rm", "docker.io/e2e/sticky-preload:1") }})
	}
	for _, del := range paths {
		start := time.Now()
		del.fn()
		t.Logf("STICKY restore store=%s path=%q source=preload: back after the delete started: %v", env.store, del.path, waitRestored(t, s, id, start))
	}
	// A pod starts from the restored image; nothing can be pulled (no registry has it).
	pod := podConfig("sticky-preload")
	podID := runPod(t, s, pod)
	c := httpdContainer("c-preload", "18120", "")
	c.Image.Image = "e2e/sticky-preload:1"
	cid := startContainer(t, s, podID, pod, c)
	st, err := s.rt.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: cid})
	assert.NilError(t, err)
	assert.Check(t, st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING, "%v", st.GetStatus().GetState())
	stopAndRemovePod(t, s, podID)
	s.stop(t)

	assert.NilError(t, os.Remove(filepath.Join(dir, "sticky.tar")))
	s = startShim(t, "--restore-pinned-images=true", "--preload-images-dir", dir, "--cri-dockerd-root-directory", s.root) // a restart
	waitListPinned(t, s, id, false)
	if env.store == "containerd" {
		waitLeased(t, s, id, false)
		ls := ctr(t, "images", "ls", "name==docker.io/e2e/sticky-preload:1")
		assert.Check(t, !strings.Contains(ls, "io.dockpin.preload") && !strings.Contains(ls, pinLabel), "our labels go with the archive: %s", ls)
	}
	docker(t, "rmi", "e2e/sticky-preload:1")
	waitSynced(t, s)
	assert.Check(t, imageGone("e2e/sticky-preload:1"))
}

// TestStickyClassicReportsLoss: on the classic store nothing holds the content of a
// pinned image that no archive provides; deleted outside the CRI, it is reported in
// the log and in verbose Status.
func TestStickyClassicReportsLoss(t *testing.T) {
	if env.store != "classic" {
		t.Skip("the containerd store restores it (TestStickyRestoreContainerd)")
	}
	id := stickyImage(t, "e2e/sticky-lost:1")
	s := startShim(t, "--restore-pinned-images=true", "--pinned-images", "e2e/sticky-lost:1")
	waitListPinned(t, s, id, true)
	waitSynced(t, s)
	docker(t, "rmi", "e2e/sticky-lost:1")
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		resp, err := s.rt.Status(context.Background(), &runtimeapi.StatusRequest{Verbose: true})
		if err != nil {
			return poll.Error(err)
		}
		if info := resp.GetInfo()["pinning"]; !strings.Contains(info, id) || !strings.Contains(info, "cannot") && !strings.Contains(info, "keeps no content") {
			return poll.Continue("not reported yet")
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(100*time.Millisecond))
	assert.Check(t, strings.Contains(s.log(t), "a pinned image was deleted outside the CRI and cannot be restored"))
}

// TestStickyLeaseSurvivesRestarts: the lease outlives our binary and a restart of the
// engine's containerd and dockerd; at start the sweep leaves exactly the current pins
// leased.
func TestStickyLeaseSurvivesRestarts(t *testing.T) {
	requireContainerdStore(t)
	a := stickyImage(t, "e2e/sticky-keep-a:1")
	b := stickyImage(t, "e2e/sticky-keep-b:1")
	s := startShim(t, "--restore-pinned-images=true", "--pinned-images", "e2e/sticky-keep-a:1")
	waitLeased(t, s, a, true)
	s.stop(t)
	_, ok := leased(t, s)[a]
	assert.Check(t, ok, "the lease outlives our binary")

	engine := func(cmd string) {
		out, err := hackOutput("engine.sh", cmd)
		assert.NilError(t, err, out)
	}
	engine("stop-dockerd")
	engine("stop-containerd")
	engine("start-containerd")
	engine("start-dockerd")
	_, ok = leased(t, s)[a]
	assert.Check(t, ok, "the lease outlives an engine restart")

	s = startShim(t, "--restore-pinned-images=true", "--pinned-images", "e2e/sticky-keep-b:1", "--cri-dockerd-root-directory", s.root)
	waitLeased(t, s, b, true)
	waitLeased(t, s, a, false)
	pins, err := s.listPinned(context.Background())
	assert.NilError(t, err)
	l := leased(t, s)
	for id, pinned := range pins {
		_, held := l[id]
		assert.Check(t, held == pinned, "image %s: pinned=%v, leased=%v", id, pinned, held)
	}
	t.Logf("STICKY after the start sweep the lease holds %d blobs, %d bytes", len(l), leasedBytes(l))
}

// TestStickyPreloadedContentGone: on the containerd store, a preloaded image deleted
// while we were not running, after its lease was taken away and its content collected,
// is back, leased and pinned after the next start. Today the start-up preload loads
// every archive anyway; once already-loaded archives are skipped at start, the sticky
// keeper's reload (unit-tested in TestStickyReloadsArchiveWhenContentIsGone) does it.
func TestStickyPreloadedContentGone(t *testing.T) {
	requireContainerdStore(t)
	dir := t.TempDir()
	id := stickyImage(t, "e2e/sticky-gone:1")
	docker(t, "save", "-o", filepath.Join(dir, "gone.tar"), "e2e/sticky-gone:1")
	docker(t, "rmi", "e2e/sticky-gone:1")
	s := startShim(t, "--restore-pinned-images=true", "--preload-images-dir", dir)
	waitLeased(t, s, id, true)
	waitSynced(t, s)
	s.stop(t)

	ctr(t, "leases", "delete", s.leaseOf(t))
	docker(t, "rmi", "e2e/sticky-gone:1")
	// The engine keeps a deleted image's content under a lease of its own until a prune
	// (label moby/prune.images); a node whose content is gone has lost those as well.
	for _, line := range strings.Split(ctr(t, "leases", "ls", "-q"), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "time=") {
			ctr(t, "leases", "delete", l)
		}
	}
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if out, err := exec.Command(filepath.Join(env.engineBin, "ctr"), "-a", containerdSocket(), "-n", "moby", "content", "get", id).CombinedOutput(); err == nil {
			recs, _ := exec.Command(filepath.Join(env.engineBin, "ctr"), "-a", containerdSocket(), "-n", "moby", "images", "ls", "-q").CombinedOutput()
			ls, _ := exec.Command(filepath.Join(env.engineBin, "ctr"), "-a", containerdSocket(), "-n", "moby", "leases", "ls").CombinedOutput()
			return poll.Continue("content %s still there (%d bytes); records:\n%s\nleases:\n%s", id, len(out), recs, ls)
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(200*time.Millisecond))

	start := time.Now()
	s = startShim(t, "--restore-pinned-images=true", "--preload-images-dir", dir, "--cri-dockerd-root-directory", s.root)
	waitListPinned(t, s, id, true)
	waitLeased(t, s, id, true)
	t.Logf("STICKY store=%s: preloaded image with its content gone loaded again %v after our start", env.store, time.Since(start).Round(time.Millisecond))
}
