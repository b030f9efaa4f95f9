//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const pinLabel = "io.cri-containerd.pinned"

func requireContainerdStore(t *testing.T) {
	t.Helper()
	if env.store != "containerd" {
		t.Skipf("needs the containerd image store (this run: %s; TestContainerdSourceStatus checks the source is off)", env.store)
	}
}

func containerdSocket() string { return filepath.Join(env.stackDir, "containerd.sock") }

// ctr runs containerd's ctr in the engine's namespace, as an operator would.
func ctr(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(env.engineBin, "ctr"), append([]string{"-a", containerdSocket(), "-n", "moby"}, args...)...)
	out, err := cmd.CombinedOutput()
	assert.NilError(t, err, "ctr %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// TestContainerdLabelPinsLive: `ctr images label` pins and unpins at the next ListImages.
func TestContainerdLabelPinsLive(t *testing.T) {
	requireContainerdStore(t)
	id := importImage(t, "e2e/ctrd-live:1")
	s := startShim(t)
	assert.Check(t, !s.crictlImages(t)[id].Pinned)

	ctr(t, "images", "label", "docker.io/e2e/ctrd-live:1", pinLabel+"=pinned")
	assert.Check(t, s.crictlImages(t)[id].Pinned, "labelled record must pin at the next call, without a restart")
	assertStatusMatchesList(t, s)
	raw := s.crictl(t, "inspecti", "-o", "json", id)
	assert.Check(t, strings.Contains(raw, "containerd-label"), "pin reason in crictl inspecti: %s", raw)

	ctr(t, "images", "label", "docker.io/e2e/ctrd-live:1", pinLabel+"=")
	assert.Check(t, !s.crictlImages(t)[id].Pinned, "removing the label must unpin")
}

// TestContainerdImportWithLabel: ctr import --label of a docker save tarball; only the exact value counts.
func TestContainerdImportWithLabel(t *testing.T) {
	requireContainerdStore(t)
	tarball := filepath.Join(t.TempDir(), "images.tar")
	want := map[string]bool{}
	for _, tc := range []struct {
		tag, label string
		pinned     bool
	}{
		{tag: "e2e/ctrd-import-pinned:1", label: pinLabel + "=pinned", pinned: true},
		{tag: "e2e/ctrd-import-true:1", label: pinLabel + "=true"},
		{tag: "e2e/ctrd-import-typo:1", label: "io.cri.containerd.pinned=pinned"},
	} {
		id := importImage(t, tc.tag)
		docker(t, "save", "-o", tarball, tc.tag)
		docker(t, "rmi", tc.tag)
		ctr(t, "images", "import", "--label", tc.label, tarball)
		removeAtEnd(t, id)
		want[id] = tc.pinned
	}
	s := startShim(t)
	got := s.crictlImages(t)
	for id, pinned := range want {
		assert.Check(t, got[id].Pinned == pinned, "%v: pinned=%v, want %v", got[id].RepoTags, got[id].Pinned, pinned)
	}
	log := s.log(t)
	assert.Check(t, strings.Contains(log, "containerd image record is not pinned") && strings.Contains(log, "io.cri.containerd.pinned=pinned"),
		"near misses must be logged")
	assert.Check(t, strings.Contains(log, pinLabel+"=true"), "the value true must be warned about")
}

// labelledRecords returns the names of the records that target digest and carry the pin.
func labelledRecords(t *testing.T, digest string) []string {
	t.Helper()
	var names []string
	for _, line := range strings.Split(ctr(t, "images", "ls"), "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[2] == digest && strings.Contains(line, pinLabel+"=pinned") {
			names = append(names, f[0])
		}
	}
	return names
}

// TestContainerdAnyRecordPinsAndTag: one labelled record of two pins the image, and a
// docker tag of a pinned image leaves it pinned. Whether the new tag's record inherits
// the label is the engine's business (Docker 29.8 does not copy it); the image stays
// pinned exactly while some record of it carries the label.
func TestContainerdAnyRecordPinsAndTag(t *testing.T) {
	requireContainerdStore(t)
	id := importImage(t, "e2e/ctrd-two:a")
	docker(t, "tag", "e2e/ctrd-two:a", "e2e/ctrd-two:b")
	s := startShim(t)
	ctr(t, "images", "label", "docker.io/e2e/ctrd-two:b", pinLabel+"=pinned")
	assert.Check(t, s.crictlImages(t)[id].Pinned, "one labelled record of two must pin the image")

	docker(t, "tag", "e2e/ctrd-two:b", "e2e/ctrd-two:c")
	assert.Check(t, s.crictlImages(t)[id].Pinned, "docker tag of a pinned image must keep it pinned")

	docker(t, "rmi", "e2e/ctrd-two:b")
	records := labelledRecords(t, id)
	t.Logf("labelled records after removing the original tag: %v", records)
	assert.Equal(t, s.crictlImages(t)[id].Pinned, len(records) > 0, "pinned must follow the records: %v", records)
}

// TestContainerdPinSurvivesOurPull: the engine's pull replaces record labels; our
// PullImage puts the pin back (and without --preserve-pin-on-pull it is lost, which
// shows the engine really strips it).
func TestContainerdPinSurvivesOurPull(t *testing.T) {
	requireContainerdStore(t)
	ref := env.registry + "/containerd/repin:1"
	id := importImage(t, ref)
	docker(t, "push", "-q", ref)

	for _, tc := range []struct {
		flags      []string
		wantPinned bool
	}{
		{flags: nil, wantPinned: true},
		{flags: []string{"--preserve-pin-on-pull=false"}, wantPinned: false},
	} {
		s := startShim(t, tc.flags...)
		ctr(t, "images", "label", ref, pinLabel+"=pinned")
		assert.Check(t, s.crictlImages(t)[id].Pinned)
		s.crictl(t, "pull", ref)
		assert.Check(t, s.crictlImages(t)[id].Pinned == tc.wantPinned, "flags %v: pinned after our pull = %v, want %v", tc.flags, !tc.wantPinned, tc.wantPinned)
	}
}

// TestContainerdDanglingRecordIgnored: a labelled moby-dangling@ record (left when the
// tag moved to another image) pins nothing unless --pin-dangling-records.
func TestContainerdDanglingRecordIgnored(t *testing.T) {
	requireContainerdStore(t)
	old := importImage(t, "e2e/ctrd-dangle:1")
	ctr(t, "images", "label", "docker.io/e2e/ctrd-dangle:1", pinLabel+"=pinned")
	importImage(t, "e2e/ctrd-dangle:1") // the tag moves; the old image keeps a dangling record
	records := ctr(t, "images", "ls")
	assert.Assert(t, strings.Contains(records, "moby-dangling@"+old), "precondition: a dangling record for %s:\n%s", old, records)

	s := startShim(t)
	got := s.crictlImages(t)
	_, listed := got[old]
	assert.Assert(t, listed, "the dangling image must still be listed")
	assert.Check(t, !got[old].Pinned, "a dangling record must not pin by default")

	s = startShim(t, "--pin-dangling-records")
	assert.Check(t, s.crictlImages(t)[old].Pinned, "--pin-dangling-records lets it pin")
}

// sockProxy forwards a unix socket to containerd's; closing it makes containerd
// unreachable for our binary while the engine keeps serving.
type sockProxy struct {
	path, target string
	mu           sync.Mutex
	lis          net.Listener
	conns        []net.Conn
}

func (p *sockProxy) start(t *testing.T) {
	t.Helper()
	_ = os.Remove(p.path)
	lis, err := net.Listen("unix", p.path)
	assert.NilError(t, err)
	p.mu.Lock()
	p.lis = lis
	p.mu.Unlock()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", p.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
}

func (p *sockProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lis != nil {
		_ = p.lis.Close()
		p.lis = nil
	}
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	_ = os.Remove(p.path)
}

// TestContainerdOutageKeepsLastGoodPins: with containerd unreachable, ListImages keeps
// answering with the previous pinned set and no error; when it is back, changes show.
func TestContainerdOutageKeepsLastGoodPins(t *testing.T) {
	requireContainerdStore(t)
	a := importImage(t, "e2e/ctrd-outage-a:1")
	b := importImage(t, "e2e/ctrd-outage-b:1")
	ctr(t, "images", "label", "docker.io/e2e/ctrd-outage-a:1", pinLabel+"=pinned")
	dir, err := os.MkdirTemp("", "proxy")
	assert.NilError(t, err)
	defer os.RemoveAll(dir)
	proxy := &sockProxy{path: filepath.Join(dir, "ctrd.sock"), target: containerdSocket()}
	proxy.start(t)
	defer proxy.stop()
	s := startShim(t, "--containerd-address", proxy.path, "--containerd-timeout", "1s")
	waitListPinned(t, s, a, true)

	proxy.stop()
	ctr(t, "images", "label", "docker.io/e2e/ctrd-outage-a:1", pinLabel+"=")
	ctr(t, "images", "label", "docker.io/e2e/ctrd-outage-b:1", pinLabel+"=pinned")
	for i := 0; i < 5; i++ {
		got, err := s.listPinned(context.Background())
		assert.NilError(t, err, "ListImages must not fail while containerd is unreachable")
		assert.Check(t, got[a] && !got[b], "call %d: the last good pins must stay: a=%v b=%v", i, got[a], got[b])
	}
	st, err := s.rt.Status(context.Background(), &runtimeapi.StatusRequest{Verbose: true})
	assert.NilError(t, err)
	assert.Check(t, strings.Contains(st.Info["pinning"], `"usingStale":true`), st.Info["pinning"])

	proxy.start(t)
	waitListPinned(t, s, b, true)
	waitListPinned(t, s, a, false)
	assert.Check(t, strings.Contains(s.log(t), "using its last good snapshot"))
}

// TestContainerdSourceStatus: crictl info shows the source, its address and namespace.
func TestContainerdSourceStatus(t *testing.T) {
	s := startShim(t)
	var info struct {
		Pinning struct {
			Sources []struct {
				Name   string         `json:"name"`
				Status map[string]any `json:"status"`
			} `json:"sources"`
		} `json:"pinning"`
	}
	raw := s.crictl(t, "info")
	assert.NilError(t, json.Unmarshal([]byte(raw), &info), raw)
	var status map[string]any
	for _, src := range info.Pinning.Sources {
		if src.Name == "containerd-label" {
			status = src.Status
		}
	}
	assert.Assert(t, status != nil, "no containerd-label source in crictl info: %s", raw)
	switch env.store {
	case "containerd":
		assert.Equal(t, status["enabled"], true)
		assert.Equal(t, status["address"], containerdSocket())
		assert.Equal(t, status["namespace"], "moby")
	default:
		assert.Equal(t, status["enabled"], false)
		assert.Check(t, strings.Contains(status["reason"].(string), "classic image store"), status["reason"])
	}
}
