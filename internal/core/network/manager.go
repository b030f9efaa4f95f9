package network

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/containernetworking/cni/libcni"
	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/internal/errkind"
	"github.com/dockpin/cri-dockerd/internal/logctx"
)

const (
	// PodInterface is the name of the pod's interface (CNI_IFNAME of the network list).
	PodInterface = "eth0"

	loopbackIfName = "lo"
	loopbackType   = "loopback"
	// loopbackNetwork is upstream's name for the loopback network, kept so that libcni's
	// cache entries of either binary are found by the other.
	loopbackNetwork = "cni-loopback"
	loopbackConfig  = `{"cniVersion":"0.3.1","name":"` + loopbackNetwork + `","plugins":[{"type":"` + loopbackType + `"}]}`

	// cleanupTimeout bounds the DEL that undoes a failed SetUp, which runs even when the
	// request's own deadline has passed.
	cleanupTimeout = time.Minute
)

// PortMapping is one hostPort of a pod, passed to plugins with the "portMappings"
// capability (such as portmap).
type PortMapping struct {
	// HostPort is the port on the host; mappings with HostPort 0 are not passed on.
	HostPort int32
	// ContainerPort is the port in the pod.
	ContainerPort int32
	// Protocol is "tcp" (also when empty), "udp" or "sctp", in any case.
	Protocol string
	// HostIP is the host address to bind; empty means all.
	HostIP string
}

// DNS is a pod's DNS configuration, passed to plugins with the "dns" capability.
// Upstream passes it only on Windows; on Linux Docker writes the pod's resolv.conf.
type DNS struct {
	// Servers are the name server addresses.
	Servers []string
	// Searches are the search domains.
	Searches []string
	// Options are resolv.conf options.
	Options []string
}

// PodNetwork identifies one sandbox's network attachment and carries what the plugins
// are told about it.
type PodNetwork struct {
	// Namespace, Name and UID are the pod's metadata (CNI_ARGS K8S_POD_NAMESPACE,
	// K8S_POD_NAME, K8S_POD_UID).
	Namespace, Name, UID string
	// SandboxID is the pause container's ID (CNI_CONTAINERID, K8S_POD_INFRA_CONTAINER_ID).
	SandboxID string
	// NetNS is the path of the sandbox's network namespace, /proc/<pid>/ns/net of the
	// pause container (CNI_NETNS). Required by SetUp; for TearDown it may be empty or
	// gone, but must never name another process's namespace (a reused PID).
	NetNS string
	// PortMappings are the pod's host ports ("portMappings" capability).
	PortMappings []PortMapping
	// Bandwidth is the pod's traffic shaping ("bandwidth" capability); see
	// BandwidthFromAnnotations.
	Bandwidth *Bandwidth
	// DNS is the pod's DNS configuration ("dns" capability); nil passes none.
	DNS *DNS
}

// Result is what SetUp and PodNetworkStatus report.
type Result struct {
	// IPs are the addresses of the pod's interface, IPv4 before IPv6 (as upstream lists
	// them); the first is the pod IP.
	IPs []net.IP
	// Interface is the name of the pod's interface.
	Interface string
}

// Manager attaches sandboxes to the CNI network configured on the node. It is safe
// for concurrent use.
type Manager struct {
	cfg      Config
	log      logrus.FieldLogger
	cni      *libcni.CNIConfig
	loopback *libcni.NetworkConfigList

	mu          sync.Mutex
	podCIDRs    []string   // the node's pod CIDRs, for the ipRanges capability
	fingerprint string     // of the config files current was loaded from
	current     *netConfig // nil until a usable configuration is loaded
	loadErr     error      // why the last load found nothing usable
}

// New returns a Manager for cfg, which must be valid and name the "cni" plugin.
// Nothing is loaded or executed until the first call. A nil log discards messages.
func New(cfg Config, log logrus.FieldLogger) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.PluginName != PluginCNI {
		return nil, fmt.Errorf("network plugin %q is not CNI: %w", cfg.PluginName, cerrdefs.ErrInvalidArgument)
	}
	log = logctx.OrDiscard(log)
	cfg.BinDirs = cleanDirs(cfg.BinDirs)
	cidrs, err := parsePodCIDR(cfg.PodCIDR)
	if err != nil {
		return nil, err
	}
	lo, err := libcni.NetworkConfFromBytes([]byte(loopbackConfig))
	if err != nil {
		return nil, fmt.Errorf("loopback network config: %w", errors.Join(cerrdefs.ErrInternal, err))
	}
	return &Manager{
		cfg:      cfg,
		log:      log,
		cni:      libcni.NewCNIConfigWithCacheDir(cfg.BinDirs, cfg.CacheDir, newTimedExec()),
		loopback: lo,
		podCIDRs: cidrs,
	}, nil
}

// Status returns nil when pod networking is ready: a usable network configuration is
// loaded, the loopback plugin is present and, if the network declares the ipRanges
// capability, the node's pod CIDR is known (as upstream requires). Otherwise the error
// (ErrFailedPrecondition) says why; it is the message of the CRI NetworkReady condition.
// The configuration is reloaded when the files in the config directory change, and
// retried on every call while it is unusable (plugin binaries may appear later).
// Unlike upstream, which kept using the last good configuration, a directory that no
// longer holds a usable configuration makes the network not ready.
func (m *Manager) Status(ctx context.Context) error {
	nc, err := m.network(ctx)
	if err != nil {
		return err
	}
	_, err = m.ipRanges(nc)
	return err
}

// Config returns the file and the network name of the CNI configuration in use,
// loading it as Status does (its plugins and the loopback plugin found in the binary
// directories), without asking for the pod CIDR, which kubelet sends later: the
// pre-flight check of a node's flags (cri-dockerd --check-config).
func (m *Manager) Config(ctx context.Context) (file, name string, err error) {
	nc, err := m.network(ctx)
	if err != nil {
		return "", "", err
	}
	return nc.file, nc.list.Name, nil
}

// SetPodCIDR sets the node's pod CIDR (comma-separated for dual stack), sent to
// plugins with the ipRanges capability. It implements the CRI UpdateRuntimeConfig; an
// empty value changes nothing.
func (m *Manager) SetPodCIDR(cidr string) error {
	cidrs, err := parsePodCIDR(cidr)
	if err != nil || len(cidrs) == 0 {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if strings.Join(m.podCIDRs, ",") != strings.Join(cidrs, ",") {
		m.log.WithField("pod_cidr", strings.Join(cidrs, ",")).Info("pod CIDR set")
		m.podCIDRs = cidrs
	}
	return nil
}

// network returns the configuration in use, reloading it when the config directory
// changed or the last load found nothing usable.
func (m *Manager) network(ctx context.Context) (*netConfig, error) {
	files, fp, err := confFiles(m.cfg.ConfDir)
	if err != nil {
		return nil, errkind.New(cerrdefs.ErrFailedPrecondition, "", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.current != nil && fp == m.fingerprint {
		return m.current, nil
	}
	nc, err := m.load(ctx, files)
	if ctx.Err() != nil {
		return nil, classify("load CNI network config", ctx.Err())
	}
	m.fingerprint = fp
	if err != nil {
		if m.current != nil || m.loadErr == nil || m.loadErr.Error() != err.Error() {
			m.log.WithError(err).Warn("pod network not ready")
		}
		m.current, m.loadErr = nil, err
		return nil, err
	}
	if m.current == nil || m.current.file != nc.file || !bytes.Equal(m.current.list.Bytes, nc.list.Bytes) {
		m.log.WithFields(logrus.Fields{"file": nc.file, "network": nc.list.Name}).Info("using CNI network config")
	}
	m.current, m.loadErr = nc, nil
	return nc, nil
}

func (m *Manager) load(ctx context.Context, files []string) (*netConfig, error) {
	nc, err := loadNetwork(ctx, m.cni, m.cfg, files)
	if err != nil {
		return nil, err
	}
	if err := findLoopback(m.cfg.BinDirs); err != nil {
		return nil, err
	}
	return nc, nil
}

// ipRanges returns the pod CIDRs to pass, or an error when the network needs them
// and they are not known yet.
func (m *Manager) ipRanges(nc *netConfig) ([]string, error) {
	m.mu.Lock()
	cidrs := m.podCIDRs
	m.mu.Unlock()
	if nc.caps[capIPRanges] && len(cidrs) == 0 {
		return nil, fmt.Errorf("network %q needs the node's pod CIDR for its ipRanges capability, which is not set yet (--pod-cidr or kubelet's UpdateRuntimeConfig; config %s): %w",
			nc.list.Name, nc.file, cerrdefs.ErrFailedPrecondition)
	}
	return cidrs, nil
}
