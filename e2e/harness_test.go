//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// stack is the engine (and registry) that TestMain started for this run.
type stack struct {
	root       string // repository root
	store      string // classic or containerd
	stackDir   string
	dockerHost string
	binary     string // our cri-dockerd
	upstream   string // upstream cri-dockerd (UPSTREAM_CRI_DOCKERD_BIN, hack/install-upstream.sh); "" when not given
	engineBin  string // dockerd, containerd, ctr, runc
	crictl     string
	registry   string // host:port of the local registry
}

// dockerBridge is the engine's default network for `--network-plugin ""`: a machine-local
// bridge hack/engine.sh makes (no NAT, no route out).
const dockerBridge = "dkpind0:10.89.0.1/24"

// The suite's one engine stack, started by TestMain (test-only process state).
var env stack

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	root, err := filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env = stack{
		root:     root,
		store:    envOr("E2E_STORE", "classic"),
		binary:   envOr("CRI_DOCKERD_BIN", filepath.Join(root, "_output", "cri-dockerd")),
		upstream: os.Getenv("UPSTREAM_CRI_DOCKERD_BIN"),
		registry: envOr("REGISTRY_ADDR", "127.0.0.1:5000"),
	}
	env.stackDir = envOr("STACK_DIR", "/tmp/dockpin-e2e-"+env.store)
	env.dockerHost = "unix://" + filepath.Join(env.stackDir, "docker.sock")
	if env.crictl, err = hackOutput("install-tools.sh", "crictl", "registry"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env.crictl = filepath.Join(env.crictl, "crictl")
	if env.engineBin, err = hackOutput("install-engine.sh"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv("E2E_KEEP") != "1" {
		// A clean engine for every run: no images left over from an earlier one.
		if _, err := hackOutput("engine.sh", "stop"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := os.RemoveAll(env.stackDir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	var engine string // engine.sh start's last line: the engine's versions and driver, as JSON
	for _, step := range [][]string{{"cni.sh", "install"}, {"engine.sh", "start"}, {"registry.sh", "start"}} {
		out, err := hackOutput(step...)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if step[0] == "engine.sh" {
			engine = out
		}
	}
	if os.Getenv("E2E_KEEP") != "1" {
		defer func() { _, _ = hackOutput("engine.sh", "stop") }()
	}
	fmt.Printf("e2e: store=%s engine=%s %s binary=%s\n", env.store, env.dockerHost, engine, env.binary)
	code := m.Run()
	if leaks := podLeaks(); code == 0 && leaks != "" {
		fmt.Fprintln(os.Stderr, "e2e: the suite left pod resources behind:", leaks)
		code = 1
	}
	return code
}

// podLeaks describes the sandboxes and pod veths the suite left behind ("" when none).
func podLeaks() string {
	var leaks []string
	if out, err := dockerErr(nil, "ps", "-aq", "--filter", "label=io.kubernetes.docker.type=podsandbox"); err != nil {
		leaks = append(leaks, err.Error())
	} else if out != "" {
		leaks = append(leaks, "sandbox containers "+strings.Join(strings.Fields(out), " "))
	}
	if out, err := exec.Command("ip", "-o", "link", "show", "master", "dkpin0").Output(); err == nil && len(bytes.TrimSpace(out)) > 0 {
		leaks = append(leaks, "veths on dkpin0: "+string(bytes.TrimSpace(out)))
	}
	return strings.Join(leaks, "; ")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// hackOutput runs a hack/ script with this run's store settings and returns its last stdout line.
func hackOutput(args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{filepath.Join(env.root, "hack", args[0])}, args[1:]...)...)
	cmd.Env = append(os.Environ(), "STORE="+env.store, "STACK_DIR="+env.stackDir, "REGISTRY_ADDR="+env.registry,
		"DOCKERD_BRIDGE="+dockerBridge)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/%s: %w", strings.Join(args, " "), err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1], nil
}

// docker runs the docker CLI against the test engine.
func docker(t testing.TB, args ...string) string {
	t.Helper()
	out, err := dockerErr(nil, args...)
	assert.NilError(t, err)
	return out
}

func dockerErr(stdin []byte, args ...string) (string, error) {
	cmd := exec.Command("docker", append([]string{"-H", env.dockerHost}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// importImage makes a one-file image tagged tag with config labels ("k=v"), offline,
// and returns its engine ID. Every call makes a distinct image; it is removed (with all
// its tags) when the test ends, so no test sees another's pins.
func importImage(t testing.TB, tag string, labels ...string) string {
	t.Helper()
	args := []string{"import"}
	for _, l := range labels {
		args = append(args, "-c", "LABEL "+l)
	}
	args = append(args, "-", tag)
	_, err := dockerErr(rootfsTar(t, tag), args...)
	assert.NilError(t, err)
	id := imageID(t, tag)
	removeAtEnd(t, id)
	return id
}

// removeAtEnd removes images (by ID or reference) when the test ends; ones already gone are fine.
func removeAtEnd(t testing.TB, refs ...string) {
	t.Cleanup(func() {
		for _, r := range refs {
			_, _ = dockerErr(nil, "rmi", "-f", r)
		}
	})
}

func imageID(t testing.TB, ref string) string {
	t.Helper()
	return docker(t, "image", "inspect", "--format", "{{.ID}}", ref)
}

// rootfsTar is a tar with one file whose content is unique to this call.
func rootfsTar(t testing.TB, name string) []byte {
	t.Helper()
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	body := []byte(name + " " + hex.EncodeToString(nonce) + "\n")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	assert.NilError(t, tw.WriteHeader(&tar.Header{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755}))
	assert.NilError(t, tw.WriteHeader(&tar.Header{Name: "etc/image-name", Mode: 0o644, Size: int64(len(body))}))
	_, err := tw.Write(body)
	assert.NilError(t, err)
	assert.NilError(t, tw.Close())
	return buf.Bytes()
}

// shim is our cri-dockerd binary running on a private socket.
type shim struct {
	endpoint string
	logPath  string
	binary   string
	args     []string
	cmd      *exec.Cmd
	rt       runtimeapi.RuntimeServiceClient
	img      runtimeapi.ImageServiceClient
	root     string // its --cri-dockerd-root-directory (the last one its flags name)
	// lease is our binary's sticky lease (verbose Status' sticky.lease, named after its
	// root directory), once leaseOf read it.
	lease string
}

// startShim starts our binary against the test engine with extra flags; it is stopped
// with SIGTERM when the test ends.
func startShim(t testing.TB, flags ...string) *shim {
	t.Helper()
	return startBinary(t, env.binary, "", flags...)
}

// startShimBin is startShim with another cri-dockerd binary (upstream's, say).
func startShimBin(t testing.TB, binary string, flags ...string) *shim {
	t.Helper()
	return startBinary(t, binary, "", flags...)
}

// startBinary starts a cri-dockerd binary (ours or upstream's, which take the same
// flags) against the test engine with extra flags, serving on cri.sock in sockDir (a
// directory of its own when ""), so that a binary started after another stopped can
// serve on the same socket path; it is stopped with SIGTERM when the test ends.
func startBinary(t testing.TB, binary, sockDir string, flags ...string) *shim {
	t.Helper()
	s := launchBinary(t, binary, sockDir, flags...)
	s.waitServing(t)
	return s
}

// launchBinary is startBinary without waiting until the binary serves.
func launchBinary(t testing.TB, binary, sockDir string, flags ...string) *shim {
	t.Helper()
	dir, err := os.MkdirTemp("", "shim")
	assert.NilError(t, err)
	if sockDir == "" {
		sockDir = dir
	}
	s := &shim{endpoint: "unix://" + filepath.Join(sockDir, "cri.sock"), logPath: filepath.Join(dir, "cri-dockerd.log"), binary: binary,
		root: filepath.Join(dir, "root")}
	for i, f := range flags {
		if f == "--cri-dockerd-root-directory" && i+1 < len(flags) {
			s.root = flags[i+1]
		}
	}
	args := append([]string{
		"--container-runtime-endpoint", s.endpoint,
		"--docker-endpoint", env.dockerHost,
		"--cri-dockerd-root-directory", filepath.Join(dir, "root"),
		"--network-plugin", "",
		"--log-level", "debug",
	}, flags...)
	// Tests remove their images while our binary may still run: restoring pinned
	// images (the default) is asked for by the tests of it (sticky_test.go) only.
	if binary == env.binary && !slices.ContainsFunc(flags, func(f string) bool { return strings.HasPrefix(f, "--restore-pinned-images") }) {
		args = append(args, "--restore-pinned-images=false")
	}
	// The host's pins directory (the default, /etc/cri-dockerd/pins.d) is not the tests'. One
	// path for every start (it is part of the pins files' saved state, which a restart
	// on the same root directory reads back), and it never exists.
	if binary == env.binary && !slices.ContainsFunc(flags, func(f string) bool { return strings.HasPrefix(f, "--pinned-images-dir") }) {
		args = append(args, "--pinned-images-dir", filepath.Join(env.stackDir, "no-pins.d"))
	}
	logf, err := os.Create(s.logPath)
	assert.NilError(t, err)
	s.args = args
	s.cmd = exec.Command(binary, args...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	assert.NilError(t, s.cmd.Start())
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
			_ = s.cmd.Wait()
		}
		_ = logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(s.logPath)
			t.Logf("%s log (whole: %s):\n%s", binary, keepLog(t, binary, b), lastLines(string(b), 60))
		}
		_ = os.RemoveAll(dir)
	})
	// As kubelet dials its runtime: answers of up to 16 MiB.
	conn, err := grpc.NewClient(s.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	assert.NilError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	s.rt, s.img = runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
	return s
}

// waitServing waits until the shim answers Version.
func (s *shim) waitServing(t testing.TB) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if s.cmd.ProcessState != nil {
			return poll.Error(fmt.Errorf("cri-dockerd exited: %s", s.cmd.ProcessState))
		}
		if _, err := s.rt.Version(context.Background(), &runtimeapi.VersionRequest{}); err != nil {
			return poll.Continue("not serving yet: %v", err)
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(100*time.Millisecond))
}

// leaseOf is our binary's sticky lease, read from its verbose Status the first time
// (not at start: a Status call fills the engine info cache that outage tests must
// find cold).
func (s *shim) leaseOf(t testing.TB) string {
	t.Helper()
	if s.lease == "" {
		var info struct {
			Sticky struct {
				Lease string `json:"lease"`
			} `json:"sticky"`
		}
		s.pinningInfo(t, &info)
		s.lease = info.Sticky.Lease
	}
	return s.lease
}

// preloadUnread names the preload files present at start that our binary has not
// read yet: meanwhile it lists every image pinned, which says nothing of an image's
// own pins. Nil for another binary.
func (s *shim) preloadUnread(t testing.TB) []string {
	t.Helper()
	if s.binary != env.binary {
		return nil
	}
	resp, err := s.rt.Status(context.Background(), &runtimeapi.StatusRequest{Verbose: true})
	assert.NilError(t, err)
	var info struct {
		Unread []string `json:"preloadUnread"`
	}
	if raw := resp.GetInfo()["pinning"]; raw != "" { // a pin proxy may say nothing of it
		assert.NilError(t, json.Unmarshal([]byte(raw), &info), raw)
	}
	return info.Unread
}

// pinningInfo decodes our binary's pinning state (verbose Status' "pinning", crictl
// info's .pinning) into out.
func (s *shim) pinningInfo(t testing.TB, out any) {
	t.Helper()
	s.statusPart(t, "pinning", out)
}

// statusPart decodes the part key of our binary's verbose Status into out.
func (s *shim) statusPart(t testing.TB, key string, out any) {
	t.Helper()
	resp, err := s.rt.Status(context.Background(), &runtimeapi.StatusRequest{Verbose: true})
	assert.NilError(t, err)
	assert.NilError(t, json.Unmarshal([]byte(resp.GetInfo()[key]), out), resp.GetInfo()[key])
}

// restart starts a stopped shim again with the same binary and flags, logging to the
// same file, and waits until it serves.
func (s *shim) restart(t testing.TB) {
	t.Helper()
	assert.Assert(t, s.cmd.ProcessState != nil, "restart of a running shim")
	logf, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_APPEND, 0)
	assert.NilError(t, err)
	t.Cleanup(func() { _ = logf.Close() })
	s.cmd = exec.Command(s.binary, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	assert.NilError(t, s.cmd.Start())
	s.waitServing(t)
}

// keepLog saves the whole log of a failed test's binary under E2E_LOG_DIR (default
// /tmp/dockpin-e2e-logs), which outlives the test's temporary directory, and returns
// its path (or why it could not).
func keepLog(t testing.TB, binary string, b []byte) string {
	dir := envOr("E2E_LOG_DIR", "/tmp/dockpin-e2e-logs")
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "-" + env.store + "-" + filepath.Base(binary) + ".log"
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err.Error()
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err.Error()
	}
	return path
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stop stops the shim with SIGTERM and waits for it (the test's cleanup then does nothing).
func (s *shim) stop(t testing.TB) {
	t.Helper()
	if s.cmd.ProcessState != nil {
		return
	}
	assert.NilError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	_ = s.cmd.Wait()
}

// kill stops the shim with SIGKILL, as a crash would, and waits for it.
func (s *shim) kill(t testing.TB) {
	t.Helper()
	assert.NilError(t, s.cmd.Process.Kill())
	_ = s.cmd.Wait()
}

func (s *shim) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	assert.NilError(t, s.cmd.Process.Signal(sig))
}

func (s *shim) log(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(s.logPath)
	assert.NilError(t, err)
	return string(b)
}

// crictl runs crictl against the shim.
func (s *shim) crictl(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(env.crictl, append([]string{"--runtime-endpoint", s.endpoint, "--image-endpoint", s.endpoint, "--timeout", "60s"}, args...)...)
	cmd.Env = append(os.Environ(), "CRI_CONFIG_FILE=/dev/null")
	out, err := cmd.CombinedOutput()
	assert.NilError(t, err, "crictl %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// crictlImage is one image of `crictl images -o json`.
type crictlImage struct {
	ID          string   `json:"id"`
	RepoTags    []string `json:"repoTags"`
	RepoDigests []string `json:"repoDigests"`
	Size        string   `json:"size"`
	Pinned      bool     `json:"pinned"`
}

// crictlImages returns `crictl images -o json` by image ID.
func (s *shim) crictlImages(t testing.TB) map[string]crictlImage {
	t.Helper()
	var out struct {
		Images []crictlImage `json:"images"`
	}
	raw := s.crictl(t, "images", "-o", "json")
	assert.NilError(t, json.Unmarshal([]byte(raw), &out), raw)
	byID := map[string]crictlImage{}
	for _, img := range out.Images {
		byID[img.ID] = img
	}
	return byID
}

// listPinned returns ListImages' pinned state by image ID through the gRPC client.
func (s *shim) listPinned(ctx context.Context) (map[string]bool, error) {
	resp, err := s.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(resp.Images))
	for _, img := range resp.Images {
		out[img.Id] = img.Pinned
	}
	return out, nil
}

// waitListPinned polls ListImages until image id has the wanted pinned state.
func waitListPinned(t *testing.T, s *shim, id string, want bool) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		got, err := s.listPinned(context.Background())
		if status.Code(err) == codes.Unavailable {
			// Fail-safe: a pin source not read yet.
			return poll.Continue("ListImages: %v", err)
		}
		if err != nil {
			return poll.Error(err)
		}
		if got[id] != want {
			return poll.Continue("image %s pinned=%v, want %v", id, got[id], want)
		}
		if unread := s.preloadUnread(t); want && len(unread) > 0 {
			return poll.Continue("preload files %v not read yet", unread)
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(100*time.Millisecond))
}

// execOutput runs a command and returns its combined output.
func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}
