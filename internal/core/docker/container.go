package docker

import (
	"context"
	"io"
	"time"
)

// Engine container states, as the engine reports them.
const (
	StateCreated    = "created"
	StateRunning    = "running"
	StatePaused     = "paused"
	StateRestarting = "restarting"
	StateRemoving   = "removing"
	StateExited     = "exited"
	StateDead       = "dead"
)

// Mount is one bind mount of a host path into a container.
type Mount struct {
	// Source is the host path.
	Source string
	// Target is the path inside the container.
	Target string
	// ReadOnly mounts it read-only; submounts stay writable unless RecursiveReadOnly.
	ReadOnly bool
	// RecursiveReadOnly makes a read-only mount's submounts read-only too (API 1.44+).
	RecursiveReadOnly bool
	// Propagation is "", "rprivate", "rslave" or "rshared".
	Propagation string
	// SELinuxRelabel asks the engine to relabel the source (the "Z" option).
	SELinuxRelabel bool
}

// ImageMount mounts an image's filesystem read-only in a container (the engine's
// "image" mount type, API 1.48+).
type ImageMount struct {
	// Image is the image's reference or ID.
	Image string
	// Target is the path inside the container.
	Target string
	// SubPath is the directory of the image to mount instead of its root ("": the root).
	SubPath string
}

// Device is a host device made available in a container.
type Device struct {
	PathOnHost        string
	PathInContainer   string
	CgroupPermissions string
}

// PortBinding publishes a container port on the host (Docker's bridge network only;
// with CNI the portmap plugin does this).
type PortBinding struct {
	// Protocol is "tcp", "udp" or "sctp".
	Protocol      string
	ContainerPort int
	// HostIP is the host address to bind ("" = all).
	HostIP string
	// HostPort is the host port (0 = the engine picks one).
	HostPort int
}

// Ulimit is one resource limit.
type Ulimit struct {
	Name string
	Soft int64
	Hard int64
}

// Resources are a container's cgroup limits. Zero values mean "no limit / engine default".
type Resources struct {
	CPUShares   int64
	CPUPeriod   int64
	CPUQuota    int64
	CpusetCpus  string
	CpusetMems  string
	MemoryLimit int64
	MemorySwap  int64
	// PidsLimit is the maximum number of processes (0 = unlimited).
	PidsLimit int64
	// Unified are cgroup v2 key/values.
	Unified map[string]string
	Ulimits []Ulimit
}

// ContainerSpec is what CreateContainer asks the engine for. It maps one to one onto
// the engine's container config and host config.
type ContainerSpec struct {
	// Name is the container name (without the leading "/").
	Name   string
	Image  string
	Labels map[string]string
	// Annotations go into the container's OCI spec, for the runtime (engine API 1.43 or
	// later; older engines get none).
	Annotations map[string]string
	// Entrypoint and Cmd override the image's when non-nil.
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	User       string
	Hostname   string
	Domainname string
	Tty        bool
	OpenStdin  bool
	StdinOnce  bool
	StopSignal string

	// NetworkMode is "none", "default"/"bridge", "host" or "container:<id>".
	NetworkMode string
	// PidMode is "", "host" or "container:<id>".
	PidMode string
	// IpcMode is "", "host", "shareable" or "container:<id>".
	IpcMode string
	// UTSMode is "" or "host".
	UTSMode string
	// Runtime is the engine's OCI runtime for the container ("" = the engine's default).
	Runtime string
	// NoHealthcheck turns off a HEALTHCHECK the image declares (kubelet probes instead).
	NoHealthcheck bool
	CgroupParent  string
	Privileged    bool
	// ReadonlyRootfs mounts the root filesystem read-only.
	ReadonlyRootfs bool
	CapAdd         []string
	CapDrop        []string
	// SecurityOpt are engine security options ("seccomp=unconfined", "no-new-privileges",
	// "apparmor=...", "label=...").
	SecurityOpt []string
	// MaskedPaths and ReadonlyPaths replace the engine's defaults when non-nil.
	MaskedPaths   []string
	ReadonlyPaths []string
	Sysctls       map[string]string
	OomScoreAdj   int
	GroupAdd      []string
	DNS           []string
	DNSSearch     []string
	DNSOptions    []string
	ExtraHosts    []string
	PortBindings  []PortBinding
	// ShmSize is the size of /dev/shm in bytes (0 = engine default).
	ShmSize int64
	Mounts  []Mount
	// ImageMounts are image volumes, read-only.
	ImageMounts []ImageMount
	Devices     []Device
	// CDIDevices are fully qualified CDI device names ("vendor.com/class=name"), which the
	// engine resolves through its CDI spec directories (a device request of driver "cdi").
	CDIDevices []string
	Resources  Resources
	// LogConfig is the container's engine log configuration (nil: the engine's default).
	LogConfig *LogConfig
}

// LogConfig is an engine log driver and its options. With the engine's default
// driver as Type, the engine adds its default options that Config does not set.
type LogConfig struct {
	Type   string
	Config map[string]string
}

// Container is one container as the engine lists it.
type Container struct {
	ID string
	// Name is the container name without the leading "/".
	Name string
	// Image is the image reference the container was created from.
	Image string
	// ImageID is the engine's image ID ("sha256:<hex>").
	ImageID string
	Labels  map[string]string
	// State is one of the State* constants.
	State   string
	Created time.Time
	// SizeRw is the size in bytes of the container's writable layer; only
	// ListContainers with ContainerFilter.Size fills it (-1 when the engine could
	// not compute it).
	SizeRw int64
}

// ContainerDetails is one container as the engine inspects it.
type ContainerDetails struct {
	Container

	// Pid is the container's init process on the host (0 when not running).
	Pid        int
	ExitCode   int
	Error      string
	OOMKilled  bool
	StartedAt  time.Time
	FinishedAt time.Time

	Hostname    string
	User        string
	Env         []string
	Entrypoint  []string
	Cmd         []string
	NetworkMode string
	PidMode     string
	IpcMode     string
	// Runtime is the container's OCI runtime ("" = the engine's default).
	Runtime string
	// IPAddress is the container's address on the engine's networks (bridge mode).
	IPAddress string
	// IPv6Address is its global IPv6 address on the engine's networks, if any.
	IPv6Address    string
	ResolvConfPath string
	HostnamePath   string
	HostsPath      string
	// LogPath is the engine's json-file log of the container.
	LogPath string
	// UpperDir is the container's writable layer as the storage driver names it
	// (overlay2's GraphDriver data); "" when the engine does not say (the containerd
	// image store).
	UpperDir string
	Mounts   []Mount
	// ImageMounts are the container's image volumes, as created.
	ImageMounts []ImageMount
	Resources   Resources
}

// ContainerFilter selects containers in ListContainers. Zero fields select everything.
type ContainerFilter struct {
	// ID selects the container with this ID or ID prefix.
	ID string
	// Labels selects containers carrying all of these label=value pairs.
	Labels map[string]string
	// Running selects only running containers; otherwise stopped ones are included too.
	Running bool
	// Size asks the engine for each container's writable layer size (Container.SizeRw).
	// The engine walks every listed container's writable layer to answer: use it
	// only where the size is needed and with a narrow filter.
	Size bool
}

// TerminalSize is a TTY's size in characters.
type TerminalSize struct {
	Width  uint16
	Height uint16
}

// ExecOptions describe one command run in a container.
type ExecOptions struct {
	Cmd []string
	Tty bool
	// Stdin, when set, is copied to the process's standard input; its end closes it.
	Stdin io.Reader
	// Stdout and Stderr receive the process's output (Stderr is unused with Tty).
	Stdout io.Writer
	Stderr io.Writer
	// Resize, when set with Tty, delivers the client's terminal sizes; each one is
	// applied to the process's TTY as it arrives.
	Resize <-chan TerminalSize
}

// AttachOptions select the streams of a running container's main process to attach to.
type AttachOptions struct {
	// Stdin, when set, is copied to the process's standard input (if the container
	// was created with OpenStdin); its end detaches stdin (and closes it for a
	// StdinOnce container).
	Stdin io.Reader
	// Stdout and Stderr, when set, receive the process's output from now on (with a
	// TTY all of it goes to Stdout).
	Stdout io.Writer
	Stderr io.Writer
	// Tty tells whether the container has a TTY (its output is then not multiplexed).
	Tty bool
	// Resize, when set with Tty, delivers terminal sizes for the container's TTY.
	Resize <-chan TerminalSize
}

// LogsOptions select a container's log stream.
type LogsOptions struct {
	// Follow keeps the stream open while the container runs.
	Follow bool
	// Since skips lines logged before this time (zero = from the start).
	Since time.Time
	// Stdout and Stderr receive the lines, each prefixed by its RFC 3339 nano timestamp
	// and a space, as the engine sends them with timestamps on. A TTY container's
	// output all goes to Stdout.
	Stdout io.Writer
	Stderr io.Writer
}

// ContainerStats are one sample of a container's resource usage.
type ContainerStats struct {
	Timestamp time.Time
	// CPUUsageNanos is the cumulative CPU time in nanoseconds.
	CPUUsageNanos uint64
	// MemoryUsageBytes is current memory usage including page cache.
	MemoryUsageBytes uint64
	// MemoryWorkingSetBytes is usage minus inactive file pages, as kubelet counts it.
	MemoryWorkingSetBytes uint64
	// MemoryRSSBytes is anonymous memory.
	MemoryRSSBytes uint64
	// PageFaults and MajorPageFaults are cumulative counts.
	PageFaults      uint64
	MajorPageFaults uint64
	// Pids is the number of processes.
	Pids uint64
	// Networks are per interface counters (only meaningful for a container owning its network).
	Networks map[string]NetworkStats
}

// NetworkStats are one interface's cumulative counters.
type NetworkStats struct {
	RxBytes  uint64
	RxErrors uint64
	TxBytes  uint64
	TxErrors uint64
}

// Containers is what package core needs from the engine for pod sandboxes and
// containers. Every method takes the request's context and returns errors classified
// with containerd errdefs (NotFound for a missing container, AlreadyExists for a taken
// name, Unavailable when the engine cannot be reached).
type Containers interface {
	// CreateContainer creates a container and returns its ID.
	CreateContainer(ctx context.Context, spec ContainerSpec) (string, error)
	StartContainer(ctx context.Context, id string) error
	// StopContainer stops a container, killing it after timeout; stopping a stopped
	// container succeeds.
	StopContainer(ctx context.Context, id string, timeout time.Duration) error
	// RemoveContainer removes a container (forcibly, when running) with its anonymous volumes.
	RemoveContainer(ctx context.Context, id string) error
	ListContainers(ctx context.Context, filter ContainerFilter) ([]Container, error)
	InspectContainer(ctx context.Context, id string) (ContainerDetails, error)
	UpdateContainerResources(ctx context.Context, id string, r Resources) error
	// Exec runs a command in a running container and returns its exit code. When ctx
	// ends first the process is killed and ctx's error returned.
	Exec(ctx context.Context, id string, opts ExecOptions) (int, error)
	// Attach connects to a running container's main process until its output ends (the
	// process exits) or ctx ends.
	Attach(ctx context.Context, id string, opts AttachOptions) error
	// ContainerLogs copies the container's log lines to opts' writers until the log
	// ends (or, with Follow, the container stops or ctx ends).
	ContainerLogs(ctx context.Context, id string, opts LogsOptions) error
	// ContainerStats takes one sample of a running container's resource usage.
	ContainerStats(ctx context.Context, id string) (ContainerStats, error)
	// PathExists tells whether path exists in a container's filesystem (its image and
	// its own layer; the container need not be running). A missing container is NotFound.
	PathExists(ctx context.Context, id, path string) (bool, error)
	// CheckpointContainer writes a CRIU checkpoint of a running container's processes
	// into dir/name on the engine's host and leaves the container running (POST
	// /containers/{id}/checkpoints; the engine needs experimental features and criu).
	CheckpointContainer(ctx context.Context, id, dir, name string) error
	// ContainerChanges lists the paths the container's writable layer added, changed
	// or deleted against its image (GET /containers/{id}/changes).
	ContainerChanges(ctx context.Context, id string) ([]FileChange, error)
	// ContainerExits streams the IDs of containers whose process ends (the engine's
	// "die" events) from now until ctx ends or the stream breaks; the error channel
	// then receives why.
	ContainerExits(ctx context.Context) (<-chan string, <-chan error)
	// ContainerEvents streams every container event from since (the engine replays
	// recent ones) until ctx ends or the stream breaks; the error channel then
	// receives why.
	ContainerEvents(ctx context.Context, since time.Time) (<-chan ContainerEvent, <-chan error)
}

// FileChange is one path a container's writable layer changed.
type FileChange struct {
	// Path is absolute, in the container's filesystem.
	Path string
	Kind ChangeKind
}

// ChangeKind says how a path changed (the engine's numbering).
type ChangeKind int

// The kinds of FileChange.
const (
	ChangeModified ChangeKind = 0
	ChangeAdded    ChangeKind = 1
	ChangeDeleted  ChangeKind = 2
)

// ContainerEvent is one container event from the engine's event stream.
type ContainerEvent struct {
	// Action is what happened: create, start, die, destroy, rename, exec_start, ...
	Action string
	// ID is the container's ID.
	ID string
	// Time is when the engine recorded the event.
	Time time.Time
}
