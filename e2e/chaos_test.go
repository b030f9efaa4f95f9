//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestChaosPinsNeverFailOpen runs pods under our binary with a sampler calling
// ListImages every 100 ms, and breaks what a node breaks: our binary SIGKILLed and
// restarted, dockerd restarted, containerd restarted, containerd's socket cut and
// restored, a preload archive damaged between two starts. No sample may ever report
// a pinned image unpinned; after each recovery calls succeed again without a restart
// of ours; the pods keep their sandboxes and IPs; their log lines across our SIGKILL
// are neither lost nor written twice; nothing leaks.
func TestChaosPinsNeverFailOpen(t *testing.T) {
	pauseImage(t)
	pn := newPodNet(t)
	root := filepath.Join(t.TempDir(), "root")
	preloadDir := t.TempDir()

	// The pinned images, one per source.
	pinned := map[string]string{"sandbox image": imageID(t, pauseRef)}
	pinned["pattern"] = importImage(t, "e2e/chaos-pattern:1")
	pinned["preload"] = importImage(t, "e2e/chaos-preload:1")
	archive := filepath.Join(preloadDir, "chaos.tar")
	docker(t, "save", "-o", archive, "e2e/chaos-preload:1")
	flags := append(pn.flags(root), "--pinned-images", "e2e/chaos-pattern:1", "--preload-images-dir", preloadDir,
		"--log-level", "info")
	var proxy *sockProxy
	if env.store == "containerd" {
		pinned["containerd label"] = importImage(t, "e2e/chaos-ctrd:1")
		ctr(t, "images", "label", "docker.io/e2e/chaos-ctrd:1", pinLabel+"=pinned")
		proxy = &sockProxy{path: filepath.Join(t.TempDir(), "ctrd.sock"), target: containerdSocket()}
		proxy.start(t)
		defer proxy.stop()
		flags = append(flags, "--containerd-address", proxy.path, "--containerd-timeout", "1s")
	}
	unpinned := importImage(t, "e2e/chaos-unpinned:1")

	var cur atomic.Pointer[shim]
	cur.Store(startShim(t, flags...))
	waitAllPinned(t, cur.Load(), pinned)

	// Pods with a container that numbers its log lines.
	logDir := t.TempDir()
	type pod struct{ id, ip, ctr, log string }
	var pods []pod
	for _, name := range []string{"chaos-a", "chaos-b"} {
		cfg := podConfig(name)
		cfg.LogDirectory = filepath.Join(logDir, name)
		assert.NilError(t, os.MkdirAll(filepath.Join(cfg.LogDirectory, "counter"), 0o750))
		id := runPod(t, cur.Load(), cfg)
		c := startContainer(t, cur.Load(), id, cfg, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "counter"},
			Image:    &runtimeapi.ImageSpec{Image: pauseRef},
			Command:  []string{"/citool", "counter"},
			LogPath:  "counter/0.log",
			Linux:    &runtimeapi.LinuxContainerConfig{},
		})
		pods = append(pods, pod{id: id, ip: podStatus(t, cur.Load(), id).GetNetwork().GetIp(), ctr: c,
			log: filepath.Join(cfg.LogDirectory, "counter", "0.log")})
	}

	// The sampler.
	var answers, errs, unsafe atomic.Int64
	var firstUnsafe atomic.Value
	ctx, stopSampler := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			got, err := cur.Load().listPinned(cctx)
			cancel()
			if err != nil {
				errs.Add(1)
			} else {
				answers.Add(1)
				for source, id := range pinned {
					if p, listed := got[id]; listed && !p {
						unsafe.Add(1)
						firstUnsafe.CompareAndSwap(nil, fmt.Sprintf("image pinned by %s (%s) listed unpinned", source, id))
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	})
	defer func() { stopSampler(); wg.Wait() }()

	// recovered waits until ListImages answers with every pinned image pinned and the
	// unpinned one unpinned.
	recovered := func(t *testing.T) {
		t.Helper()
		waitAllPinned(t, cur.Load(), pinned)
		got, err := cur.Load().listPinned(context.Background())
		assert.NilError(t, err)
		assert.Check(t, !got[unpinned], "an image nothing pins must stay unpinned")
	}
	restartShim := func(t *testing.T) {
		t.Helper()
		cur.Load().kill(t)
		cur.Store(startShim(t, flags...))
	}
	engine := func(t *testing.T, cmd string) {
		t.Helper()
		out, err := hackOutput("engine.sh", cmd)
		assert.NilError(t, err, out)
	}
	type fault struct {
		name  string
		cause func(t *testing.T)
		fix   func(t *testing.T)
	}
	faults := []fault{
		{"SIGKILL and restart of cri-dockerd", func(*testing.T) {}, restartShim},
		{"dockerd restart", func(t *testing.T) { engine(t, "stop-dockerd") }, func(t *testing.T) { engine(t, "start-dockerd") }},
		{"containerd restart", func(t *testing.T) { engine(t, "stop-containerd") }, func(t *testing.T) { engine(t, "start-containerd") }},
		{"preload archive damaged, cri-dockerd restarted", func(t *testing.T) {
			raw, err := os.ReadFile(archive)
			assert.NilError(t, err)
			assert.NilError(t, os.WriteFile(archive, raw[:len(raw)/2], 0o644))
		}, restartShim},
	}
	if proxy != nil {
		faults = append(faults, fault{"containerd socket cut and restored",
			func(*testing.T) { proxy.stop() }, func(t *testing.T) { time.Sleep(2 * time.Second); proxy.start(t) }})
	}
	for _, f := range faults {
		before, beforeErrs := answers.Load(), errs.Load()
		f.cause(t)
		time.Sleep(3 * time.Second) // the sampler runs into the fault
		start := time.Now()
		f.fix(t)
		recovered(t)
		t.Logf("chaos: %-48s recovered %6.2fs after the fix (samples during: %d answers, %d errors, unsafe so far %d)",
			f.name, time.Since(start).Seconds(), answers.Load()-before, errs.Load()-beforeErrs, unsafe.Load())
	}
	stopSampler()
	wg.Wait()
	t.Logf("chaos: sampler answers=%d errors=%d unsafe=%d (store %s)", answers.Load(), errs.Load(), unsafe.Load(), env.store)
	assert.Equal(t, unsafe.Load(), int64(0), "a pinned image was listed unpinned: %v", firstUnsafe.Load())
	assert.Check(t, answers.Load() > 50, "the sampler must have answers to judge")

	s := cur.Load()
	for _, p := range pods {
		st := podStatus(t, s, p.id)
		assert.Check(t, is.Equal(st.GetState(), runtimeapi.PodSandboxState_SANDBOX_READY), "pod %s", p.id)
		assert.Check(t, is.Equal(st.GetNetwork().GetIp(), p.ip), "pod %s kept its IP", p.id)
		cs, err := s.rt.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: p.ctr})
		assert.NilError(t, err)
		assert.Check(t, is.Equal(cs.GetStatus().GetState(), runtimeapi.ContainerState_CONTAINER_RUNNING))
		waitLogLines(t, p.log, 100)
		_, err = s.rt.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: p.ctr, Timeout: 5})
		assert.NilError(t, err)
		n := checkCountedLog(t, p.log)
		t.Logf("chaos: pod %s: %d log lines, none lost or repeated", p.id[:12], n)
		stopAndRemovePod(t, s, p.id)
	}
	assert.Check(t, is.Len(pn.leasedIPs(t), 0), "leased pod IPs left")
}

// waitAllPinned polls ListImages until every image of pinned (source -> ID) is pinned.
func waitAllPinned(t *testing.T, s *shim, pinned map[string]string) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		got, err := s.listPinned(context.Background())
		if err != nil {
			return poll.Continue("ListImages: %v", err)
		}
		for source, id := range pinned {
			if !got[id] {
				return poll.Continue("image pinned by %s (%s) not listed pinned yet", source, id)
			}
		}
		if unread := s.preloadUnread(t); len(unread) > 0 {
			return poll.Continue("preload files %v not read yet", unread)
		}
		return poll.Success()
	}, poll.WithTimeout(90*time.Second), poll.WithDelay(100*time.Millisecond))
}

// countedLine is one line of citool's counter in a CRI log.
var countedLine = regexp.MustCompile(`^\S+ stdout F line (\d+)$`)

// waitLogLines waits until the CRI log at path holds at least n lines.
func waitLogLines(t *testing.T, path string, n int) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		b, err := os.ReadFile(path)
		if err != nil {
			return poll.Continue("%v", err)
		}
		if c := bytes.Count(b, []byte("\n")); c < n {
			return poll.Continue("%d lines", c)
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second))
}

// checkCountedLog checks that the CRI log at path holds "line 1" to "line N", each
// once, in order, and returns N.
func checkCountedLog(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	assert.NilError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	want := 1
	for sc.Scan() {
		m := countedLine.FindStringSubmatch(sc.Text())
		assert.Assert(t, m != nil, "%s: not a counter line: %q", path, sc.Text())
		n, _ := strconv.Atoi(m[1])
		assert.Assert(t, n == want, "%s: line %d where line %d was due (lost or repeated)", path, n, want)
		want++
	}
	assert.NilError(t, sc.Err())
	return want - 1
}
