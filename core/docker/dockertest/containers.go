package dockertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/dockpin/cri-dockerd/core/docker"
)

// fakeContainer is one container of the fake engine.
type fakeContainer struct {
	seq     int // creation order
	spec    docker.ContainerSpec
	details docker.ContainerDetails
	logs    []logLine
	stats   *docker.ContainerStats
	// sizeRw is the writable layer's size, set by SetWritableSize.
	sizeRw int64
	// resizes are the TTY sizes applied to the main process (Attach) and its execs.
	resizes []docker.TerminalSize
	// stdin is what the main process read from attached stdins.
	stdin strings.Builder
	// logBreak, when set, breaks the next ContainerLogs call (BreakLogs).
	logBreak *logBreak
}

// logLine is one message of a container's log.
type logLine struct {
	stream string // "stdout" or "stderr"
	data   string // as sent after the timestamp: a full line ends in a newline
	time   time.Time
}

// logBreak is a broken log stream to come (see BreakLogs).
type logBreak struct {
	messages, bytes int
	err             error
}

// CreateContainer implements docker.Client: the image must exist and the name be free.
func (f *Fake) CreateContainer(ctx context.Context, spec docker.ContainerSpec) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(ctx, "CreateContainer"); err != nil {
		return "", err
	}
	name := strings.TrimPrefix(spec.Name, "/")
	if name == "" {
		name = fmt.Sprintf("fake_container_%d", f.containerSeq+1)
	}
	for _, c := range f.containers {
		if c.details.Name == name {
			return "", fmt.Errorf("create container %s: the container name %q is already in use by container %s: %w",
				name, "/"+name, c.details.ID, cerrdefs.ErrAlreadyExists)
		}
	}
	img := f.lookup(spec.Image)
	if img == nil {
		return "", fmt.Errorf("create container %s: no such image: %s: %w", name, spec.Image, cerrdefs.ErrNotFound)
	}
	f.containerSeq++
	sum := sha256.Sum256([]byte("container-" + strconv.Itoa(f.containerSeq)))
	id := hex.EncodeToString(sum[:])
	spec = cloneSpec(spec)
	spec.Name = name
	hostname := spec.Hostname
	if hostname == "" {
		hostname = id[:12]
	}
	dir := path.Join(f.info.DockerRootDir, "containers", id)
	f.containers[id] = &fakeContainer{
		seq:  f.containerSeq,
		spec: spec,
		details: docker.ContainerDetails{
			Container: docker.Container{
				ID:      id,
				Name:    name,
				Image:   spec.Image,
				ImageID: img.ID,
				Labels:  spec.Labels,
				State:   docker.StateCreated,
				Created: time.Now(),
			},
			Hostname:       hostname,
			User:           spec.User,
			Env:            spec.Env,
			Entrypoint:     spec.Entrypoint,
			Cmd:            spec.Cmd,
			NetworkMode:    spec.NetworkMode,
			PidMode:        spec.PidMode,
			Runtime:        spec.Runtime,
			IpcMode:        spec.IpcMode,
			ResolvConfPath: path.Join(dir, "resolv.conf"),
			HostnamePath:   path.Join(dir, "hostname"),
			HostsPath:      path.Join(dir, "hosts"),
			LogPath:        path.Join(dir, id+"-json.log"),
			Mounts:         spec.Mounts,
			Resources:      spec.Resources,
		},
	}
	f.notify()
	return id, nil
}

// StartContainer implements docker.Client: a created or stopped container runs;
// starting a running one is a no-op.
func (f *Fake) StartContainer(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.checkedContainer(ctx, "StartContainer", "start container", id)
	if err != nil {
		return err
	}
	if c.details.State != docker.StateRunning {
		f.setRunning(c)
		c.details.ExitCode = 0
		c.details.Error = ""
		c.details.OOMKilled = false
		f.notify()
	}
	return nil
}

// setRunning marks c running with a fresh pid and, on the bridge network, an address.
func (f *Fake) setRunning(c *fakeContainer) {
	f.pidSeq++
	d := &c.details
	d.State = docker.StateRunning
	d.Pid = 10000 + f.pidSeq
	d.StartedAt = time.Now()
	switch c.spec.NetworkMode {
	case "", "default", "bridge":
		n := c.seq - 1 // the first container gets 172.17.0.2, after the gateway
		d.IPAddress = fmt.Sprintf("172.17.%d.%d", n/253, n%253+2)
	}
}

// setStopped marks c as state (exited or dead) with its process gone.
func setStopped(c *fakeContainer, state string) {
	d := &c.details
	d.State = state
	d.Pid = 0
	d.FinishedAt = time.Now()
	d.IPAddress = ""
	d.IPv6Address = ""
}

// StopContainer implements docker.Client: a running container exits with its exit
// code (0 unless set with SetContainerState); stopping any other succeeds.
func (f *Fake) StopContainer(ctx context.Context, id string, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.checkedContainer(ctx, "StopContainer", "stop container", id)
	if err != nil {
		return err
	}
	switch c.details.State {
	case docker.StateRunning, docker.StatePaused, docker.StateRestarting:
		setStopped(c, docker.StateExited)
		f.notify()
	}
	return nil
}

// RemoveContainer implements docker.Client.
func (f *Fake) RemoveContainer(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.checkedContainer(ctx, "RemoveContainer", "remove container", id)
	if err != nil {
		return err
	}
	delete(f.containers, c.details.ID)
	f.notify()
	return nil
}

// ListContainers implements docker.Client; the newest container comes first, as
// the engine lists them.
func (f *Fake) ListContainers(ctx context.Context, filter docker.ContainerFilter) ([]docker.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(ctx, "ListContainers"); err != nil {
		return nil, err
	}
	var sel []*fakeContainer
	for _, c := range f.containers {
		d := &c.details
		if filter.Running && d.State != docker.StateRunning {
			continue
		}
		if filter.ID != "" && !strings.HasPrefix(d.ID, filter.ID) {
			continue
		}
		if !hasLabels(d.Labels, filter.Labels) {
			continue
		}
		sel = append(sel, c)
	}
	slices.SortFunc(sel, func(a, b *fakeContainer) int { return b.seq - a.seq })
	out := make([]docker.Container, 0, len(sel))
	for _, c := range sel {
		lc := cloneDetails(c.details).Container
		if filter.Size {
			lc.SizeRw = c.sizeRw
		}
		out = append(out, lc)
	}
	return out, nil
}

func hasLabels(labels, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// InspectContainer implements docker.Client.
func (f *Fake) InspectContainer(ctx context.Context, id string) (docker.ContainerDetails, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.checkedContainer(ctx, "InspectContainer", "inspect container", id)
	if err != nil {
		return docker.ContainerDetails{}, err
	}
	return cloneDetails(c.details), nil
}

// UpdateContainerResources implements docker.Client; InspectContainer shows the new resources.
func (f *Fake) UpdateContainerResources(ctx context.Context, id string, r docker.Resources) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.checkedContainer(ctx, "UpdateContainerResources", "update container resources", id)
	if err != nil {
		return err
	}
	c.details.Resources = cloneResources(r)
	c.spec.Resources = cloneResources(r)
	return nil
}

// SetExecHandler makes Exec run h (nil restores the default: no output, exit code 0).
// h runs without the fake's lock held; it may write to opts' writers and read
// opts.Stdin.
func (f *Fake) SetExecHandler(h func(id string, opts docker.ExecOptions) (int, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execHandler = h
}

// Exec implements docker.Client with the handler set by SetExecHandler. When ctx
// ends before the handler returns, Exec returns ctx's error (the handler goes on).
// With Tty, the sizes from opts.Resize are recorded (see Resizes) until Exec
// returns, and the handler's Resize delivers each one once recorded; it is closed
// when opts.Resize is, or Exec returns. Without Tty the handler gets a nil Resize.
// Active("Exec") counts the call until it returns.
func (f *Fake) Exec(ctx context.Context, id string, opts docker.ExecOptions) (int, error) {
	f.mu.Lock()
	c, err := f.checkedContainer(ctx, "Exec", "exec in container", id)
	if err != nil {
		f.mu.Unlock()
		return -1, err
	}
	if c.details.State != docker.StateRunning {
		state := c.details.State
		f.mu.Unlock()
		return -1, fmt.Errorf("exec in container %s: container is not running (%s): %w", id, state, cerrdefs.ErrFailedPrecondition)
	}
	handler := f.execHandler
	cid := c.details.ID
	defer f.begin("Exec")()
	f.mu.Unlock()
	resize, stopResizes := f.forwardResizes(ctx, c, opts.Tty, opts.Resize)
	defer stopResizes()
	opts.Resize = resize
	if handler == nil {
		return 0, nil
	}
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := handler(cid, opts)
		done <- result{code, err}
	}()
	select {
	case r := <-done:
		return r.code, r.err
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// SetAttachHandler makes Attach run h (nil restores the default: with both Stdin
// and Stdout set, stdin is echoed to stdout until it ends; Attach also ends when
// the container stops or is removed, or ctx ends). h runs without the fake's lock
// held; it may read opts.Stdin (what it reads is recorded, see AttachedStdin) and
// write to opts' writers. With Tty, its Resize delivers the sizes the fake recorded
// (see Resizes), as for an exec handler.
func (f *Fake) SetAttachHandler(h func(id string, opts docker.AttachOptions) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attachHandler = h
}

// Attach implements docker.Client with the handler set by SetAttachHandler, for a
// running container: a missing one is NotFound, one not running FailedPrecondition.
// When ctx ends before the handler returns, Attach returns ctx's error (the handler
// goes on). With Tty, the sizes from opts.Resize are recorded (see Resizes) until
// Attach returns. Active("Attach") counts the call until it returns.
func (f *Fake) Attach(ctx context.Context, id string, opts docker.AttachOptions) error {
	op := "attach to container " + id
	f.mu.Lock()
	c, err := f.checkedContainer(ctx, "Attach", "attach to container", id)
	if err != nil {
		f.mu.Unlock()
		return err
	}
	if c.details.State != docker.StateRunning {
		state := c.details.State
		f.mu.Unlock()
		return fmt.Errorf("%s: container is not running (%s): %w", op, state, cerrdefs.ErrFailedPrecondition)
	}
	handler := f.attachHandler
	cid := c.details.ID
	defer f.begin("Attach")()
	f.mu.Unlock()
	resize, stopResizes := f.forwardResizes(ctx, c, opts.Tty, opts.Resize)
	defer stopResizes()
	opts.Resize = resize
	if opts.Stdin != nil {
		opts.Stdin = &stdinRecorder{f: f, c: c, r: opts.Stdin}
	}

	if handler == nil {
		return f.echoUntilStopped(ctx, op, c, opts)
	}
	done := make(chan error, 1)
	go func() { done <- handler(cid, opts) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
}

// echoUntilStopped is the default attach: it copies opts.Stdin to opts.Stdout, if
// both are set, until stdin ends, and otherwise waits; either ends early when
// container c stops or is removed (nil) or ctx ends. Nothing is written to
// opts.Stdout after it returned (the copy may stay blocked in a Read of opts.Stdin
// until that returns).
func (f *Fake) echoUntilStopped(ctx context.Context, op string, c *fakeContainer, opts docker.AttachOptions) error {
	var copied chan error // nil, never ready, without an echo
	if opts.Stdin != nil && opts.Stdout != nil {
		out := &closableWriter{w: opts.Stdout}
		defer out.close()
		copied = make(chan error, 1)
		go func() {
			_, err := io.Copy(out, opts.Stdin)
			copied <- err
		}()
	}
	for {
		f.mu.Lock()
		running := c.details.State == docker.StateRunning && f.containers[c.details.ID] == c
		changed := f.changed
		f.mu.Unlock()
		if !running {
			return nil
		}
		select {
		case err := <-copied:
			if err != nil {
				return fmt.Errorf("%s: %w", op, err)
			}
			return nil
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", op, ctx.Err())
		}
	}
}

// closableWriter writes to w until closed, and then fails with io.ErrClosedPipe.
type closableWriter struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (cw *closableWriter) Write(p []byte) (int, error) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.closed {
		return 0, io.ErrClosedPipe
	}
	return cw.w.Write(p)
}

func (cw *closableWriter) close() {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	cw.closed = true
}

// forwardResizes starts recording the sizes from sizes for container c, when tty
// and sizes are set, and returns the channel a handler gets them from: each size
// once recorded, closed when sizes is closed (after the rest was delivered), ctx
// ends or stop is called. stop waits for the recording to end, so every size
// received before it is recorded, whether the handler read them or not. Caller
// does not hold mu.
func (f *Fake) forwardResizes(ctx context.Context, c *fakeContainer, tty bool, sizes <-chan docker.TerminalSize) (_ <-chan docker.TerminalSize, stop func()) {
	if !tty || sizes == nil {
		return nil, func() {}
	}
	out := make(chan docker.TerminalSize)
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		var queue []docker.TerminalSize // recorded, not yet delivered
		in := sizes
		for in != nil || len(queue) > 0 {
			var deliver chan<- docker.TerminalSize // nil, never ready, with nothing to deliver
			var next docker.TerminalSize
			if len(queue) > 0 {
				deliver, next = out, queue[0]
			}
			select {
			case size, ok := <-in:
				if !ok {
					in = nil
					continue
				}
				f.mu.Lock()
				c.resizes = append(c.resizes, size)
				f.mu.Unlock()
				queue = append(queue, size)
			case deliver <- next:
				queue = queue[1:]
			case <-quit:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, func() {
		close(quit)
		<-done
	}
}

// Resizes returns the TTY sizes applied to container id's main process (through
// Attach) and to its execs, in order; nil when there is no such container.
func (f *Fake) Resizes(id string) []docker.TerminalSize {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.container(id)
	if c == nil {
		return nil
	}
	return slices.Clone(c.resizes)
}

// AppendLog adds line to container id's log on stream ("stdout" or "stderr") at t,
// ending it with a newline if it has none; it does nothing when there is no such
// container.
func (f *Fake) AppendLog(id, stream, line string, t time.Time) {
	f.AppendLogData(id, stream, strings.TrimSuffix(line, "\n")+"\n", t)
}

// AppendLogData adds one message to container id's log on stream at t, sent as data
// is: without a final newline it is a partial line, as the engine sends a line cut
// at its 16 KiB buffer or output that ends without one. It does nothing when there
// is no such container.
func (f *Fake) AppendLogData(id, stream, data string, t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.container(id); c != nil {
		c.logs = append(c.logs, logLine{stream: stream, data: data, time: t})
		f.notify()
	}
}

// SetLogChunkSize makes ContainerLogs write each message in pieces of at most n
// bytes, as a stream arriving in small packets does (0, the default: one Write
// per message).
func (f *Fake) SetLogChunkSize(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logChunk = n
}

// SetLogSinceIgnored makes ContainerLogs send every message whatever the Since it is
// asked for, as an engine whose since filter is coarser than the caller's resume
// point: the caller must drop what it already has.
func (f *Fake) SetLogSinceIgnored(ignored bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sinceIgnored = ignored
}

// BreakLogs makes the next ContainerLogs call for container id fail with err after
// it sent messages messages and then the first bytes bytes of the next one, as a
// connection to the engine breaking mid-stream (once; a call that ends before
// reaching that message leaves the break for the next one). It does nothing when
// there is no such container.
func (f *Fake) BreakLogs(id string, messages, bytes int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.container(id); c != nil {
		c.logBreak = &logBreak{messages: messages, bytes: bytes, err: err}
	}
}

// LogsRequests returns the options of every ContainerLogs call made with ref (as
// the caller passed it), failed calls included, in order; their writers are nil.
func (f *Fake) LogsRequests(ref string) []docker.LogsOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.logRequests[ref])
}

// ContainerLogs implements docker.Client: the messages logged since opts.Since, each
// as "<RFC 3339 nano time> <message>"; with Follow, new ones until the container
// stops or is removed, or ctx ends. Active("ContainerLogs") counts the call until
// it returns.
func (f *Fake) ContainerLogs(ctx context.Context, id string, opts docker.LogsOptions) error {
	f.mu.Lock()
	req := opts
	req.Stdout, req.Stderr = nil, nil
	f.logRequests[id] = append(f.logRequests[id], req)
	c, err := f.checkedContainer(ctx, "ContainerLogs", "container logs", id)
	if err != nil {
		f.mu.Unlock()
		return err
	}
	defer f.begin("ContainerLogs")()
	w := &logWriter{f: f, c: c, opts: opts, tty: c.spec.Tty, chunk: f.logChunk, ignoreSince: f.sinceIgnored}
	next := 0
	for {
		lines := slices.Clone(c.logs[next:])
		next = len(c.logs)
		running := c.details.State == docker.StateRunning && f.containers[c.details.ID] == c
		changed := f.changed
		f.mu.Unlock()
		if err := w.write(lines); err != nil {
			return err
		}
		if !opts.Follow || !running {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
		f.mu.Lock()
	}
}

// logWriter sends a container's log messages to one ContainerLogs caller.
type logWriter struct {
	f           *Fake
	c           *fakeContainer
	opts        docker.LogsOptions
	tty         bool
	chunk       int
	ignoreSince bool
	sent        int // messages sent
}

// write sends lines, or fails when the stream breaks (see BreakLogs).
func (w *logWriter) write(lines []logLine) error {
	for _, l := range lines {
		if !w.ignoreSince && l.time.Before(w.opts.Since) {
			continue
		}
		dst := w.opts.Stdout
		if l.stream == "stderr" && !w.tty {
			dst = w.opts.Stderr
		}
		if dst == nil {
			continue
		}
		text := l.time.Format(time.RFC3339Nano) + " " + l.data
		if brk := w.takeBreak(); brk != nil {
			if err := w.send(dst, text[:min(brk.bytes, len(text))]); err != nil {
				return err
			}
			return brk.err
		}
		if err := w.send(dst, text); err != nil {
			return err
		}
		w.sent++
	}
	return nil
}

// takeBreak returns the container's break when it is due now, and disarms it.
func (w *logWriter) takeBreak() *logBreak {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	brk := w.c.logBreak
	if brk == nil || brk.messages != w.sent {
		return nil
	}
	w.c.logBreak = nil
	return brk
}

// send writes text to dst in pieces of at most chunk bytes.
func (w *logWriter) send(dst io.Writer, text string) error {
	for text != "" {
		n := len(text)
		if w.chunk > 0 {
			n = min(n, w.chunk)
		}
		if _, err := io.WriteString(dst, text[:n]); err != nil {
			return err
		}
		text = text[n:]
	}
	return nil
}

// SetWritableSize sets the size of container id's writable layer, which
// ListContainers reports with ContainerFilter.Size.
func (f *Fake) SetWritableSize(id string, n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.container(id); c != nil {
		c.sizeRw = n
	}
}

// SetStats makes ContainerStats of container id return s.
func (f *Fake) SetStats(id string, s docker.ContainerStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.container(id); c != nil {
		s.Networks = maps.Clone(s.Networks)
		c.stats = &s
	}
}

// ContainerStats implements docker.Client: the sample set with SetStats, or a zero
// sample taken now.
func (f *Fake) ContainerStats(ctx context.Context, id string) (docker.ContainerStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.checkedContainer(ctx, "ContainerStats", "container stats", id)
	if err != nil {
		return docker.ContainerStats{}, err
	}
	if c.stats == nil {
		return docker.ContainerStats{Timestamp: time.Now()}, nil
	}
	s := *c.stats
	s.Networks = maps.Clone(s.Networks)
	return s, nil
}

// Spec returns the spec container id was created with (resources as last updated).
func (f *Fake) Spec(id string) (docker.ContainerSpec, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.container(id)
	if c == nil {
		return docker.ContainerSpec{}, false
	}
	return cloneSpec(c.spec), true
}

// ContainerIDs returns the IDs of all containers, sorted.
func (f *Fake) ContainerIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.containers))
}

// SetContainerState changes a container's state and exit code behind the shim's
// back, as a crash or an operator would: "running" gives it a process, any other
// state takes it away ("exited" and "dead" also set FinishedAt). It does nothing
// when there is no such container.
func (f *Fake) SetContainerState(id, state string, exitCode int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.container(id)
	if c == nil {
		return
	}
	switch state {
	case docker.StateRunning:
		if c.details.State != docker.StateRunning {
			f.setRunning(c)
		}
	case docker.StateExited, docker.StateDead:
		setStopped(c, state)
	default:
		c.details.State = state
		if state != docker.StatePaused && state != docker.StateRestarting {
			c.details.Pid = 0
		}
	}
	c.details.ExitCode = exitCode
	f.notify()
}

// SetPid makes pid the host process of running container id's main process, for
// tests that need a real process there (the fake makes pids up); it does nothing
// when there is no such container or it is not running.
func (f *Fake) SetPid(id string, pid int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.container(id); c != nil && c.details.State == docker.StateRunning {
		c.details.Pid = pid
	}
}

// Active returns how many calls of method (Exec, Attach or ContainerLogs, the calls
// that last) the engine accepted and that have not returned yet.
func (f *Fake) Active(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.active[method]
}

// begin counts an accepted call of method as active until the returned end is
// called. Caller holds mu; end must be called without it.
func (f *Fake) begin(method string) (end func()) {
	f.active[method]++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.active[method]--
	}
}

// AttachedStdin returns what container id's main process read from the stdins of
// Attach calls, in order ("" when there is no such container).
func (f *Fake) AttachedStdin(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.container(id); c != nil {
		return c.stdin.String()
	}
	return ""
}

// stdinRecorder records what is read from an attached stdin as container c's input.
type stdinRecorder struct {
	f *Fake
	c *fakeContainer
	r io.Reader
}

func (s *stdinRecorder) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.f.mu.Lock()
	s.c.stdin.Write(p[:n])
	s.f.mu.Unlock()
	return n, err
}

// checkedContainer does what every container method does first, with f.mu held: the
// injected error or outage for method, then the lookup of id, NotFound (naming op)
// when there is no such container.
func (f *Fake) checkedContainer(ctx context.Context, method, op, id string) (*fakeContainer, error) {
	if err := f.check(ctx, method); err != nil {
		return nil, err
	}
	c := f.container(id)
	if c == nil {
		return nil, noSuchContainer(op, id)
	}
	return c, nil
}

// container finds a container as the engine does: by ID, name or unique ID prefix.
// Caller holds mu.
func (f *Fake) container(ref string) *fakeContainer {
	if ref == "" {
		return nil
	}
	if c, ok := f.containers[ref]; ok {
		return c
	}
	name := strings.TrimPrefix(ref, "/")
	var byPrefix []*fakeContainer
	for id, c := range f.containers {
		if c.details.Name == name {
			return c
		}
		if strings.HasPrefix(id, ref) {
			byPrefix = append(byPrefix, c)
		}
	}
	if len(byPrefix) == 1 {
		return byPrefix[0]
	}
	return nil
}

// notify wakes everyone waiting for a container change. Caller holds mu.
func (f *Fake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func noSuchContainer(op, id string) error {
	return fmt.Errorf("%s: no such container: %s: %w", op, id, cerrdefs.ErrNotFound)
}

// cloneSpec copies spec deeply, so callers never share the fake's slices and maps.
func cloneSpec(s docker.ContainerSpec) docker.ContainerSpec {
	s.Labels = maps.Clone(s.Labels)
	s.Entrypoint = slices.Clone(s.Entrypoint)
	s.Cmd = slices.Clone(s.Cmd)
	s.Env = slices.Clone(s.Env)
	s.CapAdd = slices.Clone(s.CapAdd)
	s.CapDrop = slices.Clone(s.CapDrop)
	s.SecurityOpt = slices.Clone(s.SecurityOpt)
	s.MaskedPaths = slices.Clone(s.MaskedPaths)
	s.ReadonlyPaths = slices.Clone(s.ReadonlyPaths)
	s.Sysctls = maps.Clone(s.Sysctls)
	s.GroupAdd = slices.Clone(s.GroupAdd)
	s.DNS = slices.Clone(s.DNS)
	s.DNSSearch = slices.Clone(s.DNSSearch)
	s.DNSOptions = slices.Clone(s.DNSOptions)
	s.ExtraHosts = slices.Clone(s.ExtraHosts)
	s.PortBindings = slices.Clone(s.PortBindings)
	s.Mounts = slices.Clone(s.Mounts)
	s.Devices = slices.Clone(s.Devices)
	s.Resources = cloneResources(s.Resources)
	return s
}

func cloneResources(r docker.Resources) docker.Resources {
	r.Unified = maps.Clone(r.Unified)
	r.Ulimits = slices.Clone(r.Ulimits)
	return r
}

// cloneDetails copies d deeply.
func cloneDetails(d docker.ContainerDetails) docker.ContainerDetails {
	d.Labels = maps.Clone(d.Labels)
	d.Env = slices.Clone(d.Env)
	d.Entrypoint = slices.Clone(d.Entrypoint)
	d.Cmd = slices.Clone(d.Cmd)
	d.Mounts = slices.Clone(d.Mounts)
	d.Resources = cloneResources(d.Resources)
	return d
}
