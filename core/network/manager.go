package network

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/containernetworking/cni/libcni"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/logctx"
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
		cni:      libcni.NewCNIConfigWithCacheDir(cfg.BinDirs, cfg.CacheDir, nil),
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

// SetUp attaches the sandbox to the network: first its loopback interface ("lo", by the
// loopback plugin), then the network list as eth0 with the capability arguments
// portMappings, bandwidth, ipRanges (when the pod CIDR is known) and dns (when given).
// If either fails, what was set up is torn down again and the error is returned: the
// plugin's message, classified as described for classify.
func (m *Manager) SetUp(ctx context.Context, pn PodNetwork) (Result, error) {
	if err := pn.validate(true); err != nil {
		return Result{}, err
	}
	op := "set up network of sandbox " + pn.SandboxID
	nc, err := m.network(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", op, err)
	}
	cidrs, err := m.ipRanges(nc)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", op, err)
	}
	log := logctx.For(ctx, m.log).WithFields(logrus.Fields{"sandbox": pn.SandboxID, "pod": pn.Namespace + "/" + pn.Name})
	lo := m.loopbackConf(pn, pn.NetNS)
	if _, err := m.cni.AddNetworkList(ctx, m.loopback, lo); err != nil {
		m.undo(ctx, log, nil, nil, lo)
		return Result{}, classify(op+": loopback", err)
	}
	rt := runtimeConf(pn, pn.NetNS, cidrs)
	res, err := m.cni.AddNetworkList(ctx, nc.list, rt)
	if err != nil {
		m.undo(ctx, log, nc.list, rt, lo)
		return Result{}, classify(fmt.Sprintf("%s: network %q", op, nc.list.Name), err)
	}
	r, err := toResult(res)
	if err != nil {
		m.undo(ctx, log, nc.list, rt, lo)
		return Result{}, classify(fmt.Sprintf("%s: network %q", op, nc.list.Name), err)
	}
	log.WithFields(logrus.Fields{"network": nc.list.Name, "ips": r.IPs}).Info("pod network set up")
	return r, nil
}

// undo deletes what a failed SetUp may have added, on a context that outlives the
// request's deadline (the plugins must release addresses either way), and logs failures.
func (m *Manager) undo(ctx context.Context, log logrus.FieldLogger, list *libcni.NetworkConfigList, rt, lo *libcni.RuntimeConf) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if list != nil {
		if err := m.cni.DelNetworkList(ctx, list, rt); err != nil {
			log.WithError(err).Warn("undo pod network after failed set up")
		}
	}
	if err := m.cni.DelNetworkList(ctx, m.loopback, lo); err != nil {
		log.WithError(err).Warn("undo pod loopback after failed set up")
	}
}

// TearDown detaches the sandbox from the network. It deletes with the configuration and
// arguments the attachment was made with, as recorded in libcni's cache, so a network
// configuration changed or removed since SetUp does not leak addresses; without a cache
// entry it deletes with the current configuration. A network namespace that is gone is
// passed as empty, which the CNI spec allows for DEL (plugins then only release what
// they hold on the host). It is idempotent: tearing down twice, or a sandbox that was
// never set up, succeeds. A failure of the loopback plugin is only logged, as upstream.
func (m *Manager) TearDown(ctx context.Context, pn PodNetwork) error {
	if err := pn.validate(false); err != nil {
		return err
	}
	op := "tear down network of sandbox " + pn.SandboxID
	log := logctx.For(ctx, m.log).WithFields(logrus.Fields{"sandbox": pn.SandboxID, "pod": pn.Namespace + "/" + pn.Name})
	netns := pn.NetNS
	if netns != "" {
		if _, err := os.Stat(netns); errors.Is(err, os.ErrNotExist) {
			log.WithField("netns", netns).Debug("network namespace is gone, deleting without it")
			netns = ""
		}
	}

	var errs []error
	done := false
	for _, att := range m.cachedAttachments(log, pn.SandboxID) {
		list, err := libcni.NetworkConfFromBytes(att.Config)
		if err != nil || len(list.Plugins) == 0 {
			log.WithField("network", att.Network).Warn("cached network config unusable, deleting with the current one")
			continue
		}
		done = true
		rt := &libcni.RuntimeConf{
			ContainerID: pn.SandboxID, NetNS: netns, IfName: att.IfName,
			Args: att.CniArgs, CapabilityArgs: att.CapabilityArgs,
		}
		if err := m.cni.DelNetworkList(ctx, list, rt); err != nil {
			errs = append(errs, classify(fmt.Sprintf("%s: network %q", op, list.Name), err))
		}
	}
	if !done {
		nc, err := m.network(ctx)
		switch {
		case err != nil && netns == "":
			// Nothing cached, no namespace left and no config to delete with: whatever a
			// plugin still holds cannot be found from here, and failing would keep the
			// sandbox (and kubelet's cleanup of it) stuck until the config returns.
			log.WithError(err).Warn("no cached network and no usable config: nothing left to tear down")
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", op, err))
		default:
			cidrs, _ := m.ipRanges(nc)
			if err := m.cni.DelNetworkList(ctx, nc.list, runtimeConf(pn, netns, cidrs)); err != nil {
				errs = append(errs, classify(fmt.Sprintf("%s: network %q", op, nc.list.Name), err))
			}
		}
	}
	if err := m.cni.DelNetworkList(ctx, m.loopback, m.loopbackConf(pn, netns)); err != nil {
		log.WithError(err).Warn("tear down pod loopback")
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	log.Info("pod network torn down")
	return nil
}

// PodNetworkStatus returns the sandbox's addresses from the result its SetUp recorded in
// libcni's cache (in --cni-cache-dir), so it needs no exec and survives a restart of the
// shim, and also works for sandboxes set up by upstream cri-dockerd with the same cache
// directory. It returns ErrNotFound when nothing is recorded for the sandbox.
func (m *Manager) PodNetworkStatus(ctx context.Context, sandboxID string) (Result, error) {
	if sandboxID == "" {
		return Result{}, fmt.Errorf("pod network status: no sandbox ID: %w", cerrdefs.ErrInvalidArgument)
	}
	op := "network status of sandbox " + sandboxID
	log := logctx.For(ctx, m.log).WithField("sandbox", sandboxID)
	for _, att := range m.cachedAttachments(log, sandboxID) {
		// The version only selects the form the cached result is converted to.
		list := &libcni.NetworkConfigList{Name: att.Network, CNIVersion: types100.ImplementedSpecVersion}
		res, err := m.cni.GetNetworkListCachedResult(list, &libcni.RuntimeConf{ContainerID: sandboxID, IfName: att.IfName})
		if err != nil {
			return Result{}, classify(op, err)
		}
		if res == nil {
			continue
		}
		r, err := toResult(res)
		if err != nil {
			return Result{}, classify(op, err)
		}
		return r, nil
	}
	return Result{}, fmt.Errorf("%s: no network attachment recorded: %w", op, cerrdefs.ErrNotFound)
}

// cachedAttachments returns libcni's cache entries of the sandbox's pod interface.
func (m *Manager) cachedAttachments(log logrus.FieldLogger, sandboxID string) []*libcni.NetworkAttachment {
	all, err := m.cni.GetCachedAttachments(sandboxID)
	if err != nil {
		log.WithError(err).Warn("read CNI cache")
		return nil
	}
	var out []*libcni.NetworkAttachment
	for _, a := range all {
		if a.IfName == PodInterface && a.ContainerID == sandboxID {
			out = append(out, a)
		}
	}
	return out
}

// network returns the configuration in use, reloading it when the config directory
// changed or the last load found nothing usable.
func (m *Manager) network(ctx context.Context) (*netConfig, error) {
	files, fp, err := confFiles(m.cfg.ConfDir)
	if err != nil {
		return nil, &kindError{kind: cerrdefs.ErrFailedPrecondition, msg: err.Error(), cause: err}
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

func (m *Manager) loopbackConf(pn PodNetwork, netns string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: pn.SandboxID, NetNS: netns, IfName: loopbackIfName, Args: cniArgs(pn)}
}

// validate checks what the caller passes; errors wrap ErrInvalidArgument.
func (pn PodNetwork) validate(setUp bool) error {
	if pn.SandboxID == "" {
		return fmt.Errorf("pod network: no sandbox ID: %w", cerrdefs.ErrInvalidArgument)
	}
	if setUp && pn.NetNS == "" {
		return fmt.Errorf("pod network of sandbox %s: no network namespace: %w", pn.SandboxID, cerrdefs.ErrInvalidArgument)
	}
	for _, p := range pn.PortMappings {
		switch strings.ToLower(p.Protocol) {
		case "", "tcp", "udp", "sctp":
		default:
			return fmt.Errorf("port mapping %d/%s: unknown protocol: %w", p.ContainerPort, p.Protocol, cerrdefs.ErrInvalidArgument)
		}
		if p.ContainerPort <= 0 || p.ContainerPort > 65535 || p.HostPort < 0 || p.HostPort > 65535 {
			return fmt.Errorf("port mapping %d:%d: port out of range: %w", p.HostPort, p.ContainerPort, cerrdefs.ErrInvalidArgument)
		}
		if p.HostIP != "" && net.ParseIP(p.HostIP) == nil {
			return fmt.Errorf("port mapping %d:%d: invalid host IP %q: %w", p.HostPort, p.ContainerPort, p.HostIP, cerrdefs.ErrInvalidArgument)
		}
	}
	return nil
}

// toResult picks the pod interface's addresses out of a plugin result: the IPs that
// name an interface called eth0 inside the sandbox, or all IPs when none names one
// (results of plugins that report no interfaces). IPv4 come before IPv6.
func toResult(res cnitypes.Result) (Result, error) {
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		return Result{}, err
	}
	pod := map[int]bool{}
	for i, iface := range r.Interfaces {
		if iface != nil && iface.Name == PodInterface && iface.Sandbox != "" {
			pod[i] = true
		}
	}
	var mine, all []net.IP
	for _, ip := range r.IPs {
		if ip == nil || ip.Address.IP == nil {
			continue
		}
		all = append(all, ip.Address.IP)
		if ip.Interface != nil && pod[*ip.Interface] {
			mine = append(mine, ip.Address.IP)
		}
	}
	if len(mine) == 0 {
		mine = all
	}
	sort.SliceStable(mine, func(i, j int) bool { return mine[i].To4() != nil && mine[j].To4() == nil })
	return Result{IPs: mine, Interface: PodInterface}, nil
}
