package dockertest

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// Fake is a stateful in-memory engine. The zero value is not usable; call New.
type Fake struct {
	mu       sync.Mutex
	images   map[string]*docker.Image // by ID
	registry map[string]docker.Image  // pullable images by normalised reference
	errs     map[string]error         // injected error per method name
	down     bool
	info     docker.Info
	version  docker.Version
	pulls    []docker.PullOptions
	calls    map[string]int                  // engine calls per method
	archives map[string][]docker.Image       // loadable archives by content
	imageEvs eventLog[docker.ImageEvent]     // ImageEvents streams and what they were sent
	ctrs     eventLog[docker.ContainerEvent] // ContainerEvents streams and what they were sent
	ctrMuted bool                            // container events not sent
	exitSubs map[chan string]bool            // ContainerExits streams

	containers   map[string]*fakeContainer // by ID
	containerSeq int                       // containers ever created: IDs and addresses
	pidSeq       int                       // container starts: fake pids
	execHandler  func(id string, opts docker.ExecOptions) (int, error)
	changed      chan struct{} // closed and replaced whenever a container or its log changes

	attachHandler func(id string, opts docker.AttachOptions) error // set by SetAttachHandler (streams.go)
	replyHooks    map[string]func(context.Context) error           // by method, set by SetReplyHook (hooks.go)
	active        map[string]int                                   // calls under way per method (Active)
	logRequests   map[string][]docker.LogsOptions                  // ContainerLogs calls per container reference
	logChunk      int                                              // SetLogChunkSize
	sinceIgnored  bool                                             // SetLogSinceIgnored

	faults map[containerCall]containerFault // per-container faults (faults.go)

	fsInodesUsed uint64 // SetFsInodesUsed

	imageFiles map[string][]string // SetImageFiles: paths in an image's filesystem, by image ID
}

var _ docker.Client = (*Fake)(nil)

// New returns an empty running engine (classic store, API 1.51).
func New() *Fake {
	return &Fake{
		images:   map[string]*docker.Image{},
		registry: map[string]docker.Image{},
		errs:     map[string]error{},
		calls:    map[string]int{},
		archives: map[string][]docker.Image{},
		exitSubs: map[chan string]bool{},
		info: docker.Info{
			Driver: "overlay2", DockerRootDir: "/var/lib/docker", CgroupDriver: "systemd",
			Runtimes: []string{"io.containerd.runc.v2", "runc"}, DefaultRuntime: "runc",
		},
		version: docker.Version{Version: "29.8.1", APIVersion: "1.51", NegotiatedAPIVersion: "1.51"},

		containers:  map[string]*fakeContainer{},
		changed:     make(chan struct{}),
		active:      map[string]int{},
		logRequests: map[string][]docker.LogsOptions{},
	}
}

// Calls returns how many times method reached the engine.
func (f *Fake) Calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// SetDown makes every call fail as if the engine socket were gone.
func (f *Fake) SetDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
	if down {
		f.breakStreams(fmt.Errorf("engine went away: %w", cerrdefs.ErrUnavailable))
	}
}

// SetInfo replaces what Info returns.
func (f *Fake) SetInfo(info docker.Info) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.info = info
}

// InjectError makes method (e.g. "ListImages") fail with err until cleared with nil.
// It panics when method is not a method of docker.Client, so that a misspelt name
// fails the test instead of injecting nothing.
func (f *Fake) InjectError(method string, err error) {
	if !clientMethods()[method] {
		panic(fmt.Sprintf("dockertest: InjectError(%q): docker.Client has no such method", method))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.errs, method)
		return
	}
	f.errs[method] = err
}

// clientMethods is the method set of docker.Client, for checking method names.
var clientMethods = sync.OnceValue(func() map[string]bool {
	t := reflect.TypeFor[docker.Client]()
	names := make(map[string]bool, t.NumMethod())
	for i := range t.NumMethod() {
		names[t.Method(i).Name] = true
	}
	return names
})

// check counts a call and returns the error method should fail with: the context's,
// the engine being down, or one injected for method.
func (f *Fake) check(ctx context.Context, method string) error {
	f.calls[method]++
	if err := ctx.Err(); err != nil {
		return err
	}
	if f.down {
		return fmt.Errorf("%s: cannot connect to the docker daemon: %w", method, cerrdefs.ErrUnavailable)
	}
	return f.errs[method]
}

// Ping implements docker.Client.
func (f *Fake) Ping(ctx context.Context) (err error) {
	defer f.replied(ctx, "Ping", &err)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.check(ctx, "Ping")
}

// Version implements docker.Client.
func (f *Fake) Version(ctx context.Context) (docker.Version, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.version, f.check(ctx, "Version")
}

// Info implements docker.Client.
func (f *Fake) Info(ctx context.Context) (docker.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.info, f.check(ctx, "Info")
}
