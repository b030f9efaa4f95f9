package core

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/dockpin/cri-dockerd/internal/core/logs"
	"github.com/dockpin/cri-dockerd/internal/core/network"
)

// rtFakeNetwork is a stateful core.Network: it allocates IPv4 addresses from
// 10.88.0.0/16 (and, with ipv6, one from fd00:88::/64) per sandbox, keeps them
// until TearDown, and records every PodNetwork it was given.
type rtFakeNetwork struct {
	mu          sync.Mutex
	ipv6        bool
	next        int
	ips         map[string][]net.IP // by sandbox ID
	setUps      []network.PodNetwork
	tearDowns   []network.PodNetwork
	setUpErr    error
	tearDownErr error
	statusErr   error
	podCIDR     string
}

var _ Network = (*rtFakeNetwork)(nil)

func newRTFakeNetwork() *rtFakeNetwork {
	return &rtFakeNetwork{ips: map[string][]net.IP{}}
}

// Status implements Network.
func (n *rtFakeNetwork) Status(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.statusErr
}

// SetUp implements Network: NetNS is required, an injected error fails it before
// anything is allocated.
func (n *rtFakeNetwork) SetUp(_ context.Context, pn network.PodNetwork) (network.Result, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.setUps = append(n.setUps, clonePodNetwork(pn))
	if n.setUpErr != nil {
		return network.Result{}, n.setUpErr
	}
	if pn.NetNS == "" || pn.SandboxID == "" {
		return network.Result{}, fmt.Errorf("set up %q without a network namespace: %w", pn.SandboxID, cerrdefs.ErrInvalidArgument)
	}
	if ips, ok := n.ips[pn.SandboxID]; ok {
		return network.Result{IPs: ips, Interface: "eth0"}, nil
	}
	n.next++
	ips := []net.IP{net.IPv4(10, 88, byte(n.next/256), byte(n.next%256)).To4()}
	if n.ipv6 {
		ips = append(ips, net.ParseIP(fmt.Sprintf("fd00:88::%x", n.next)))
	}
	n.ips[pn.SandboxID] = ips
	return network.Result{IPs: ips, Interface: "eth0"}, nil
}

// TearDown implements Network: idempotent, fine without a network namespace.
func (n *rtFakeNetwork) TearDown(_ context.Context, pn network.PodNetwork) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.tearDowns = append(n.tearDowns, clonePodNetwork(pn))
	if n.tearDownErr != nil {
		return n.tearDownErr
	}
	delete(n.ips, pn.SandboxID)
	return nil
}

// TearDownError makes every TearDown fail with err, keeping the addresses.
func (n *rtFakeNetwork) TearDownError(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.tearDownErr = err
}

// PodNetworkStatus implements Network: NotFound for a sandbox without addresses.
func (n *rtFakeNetwork) PodNetworkStatus(_ context.Context, sandboxID string) (network.Result, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ips, ok := n.ips[sandboxID]
	if !ok {
		return network.Result{}, fmt.Errorf("no network status of sandbox %s: %w", sandboxID, cerrdefs.ErrNotFound)
	}
	return network.Result{IPs: slices.Clone(ips), Interface: "eth0"}, nil
}

// SetPodCIDR implements Network.
func (n *rtFakeNetwork) SetPodCIDR(cidr string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.podCIDR = cidr
	return nil
}

func (n *rtFakeNetwork) SetUpError(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.setUpErr = err
}

func (n *rtFakeNetwork) StatusError(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.statusErr = err
}

func (n *rtFakeNetwork) SetUps() []network.PodNetwork {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.setUps)
}

func (n *rtFakeNetwork) TearDowns() []network.PodNetwork {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.tearDowns)
}

// Attached tells whether sandboxID holds addresses.
func (n *rtFakeNetwork) Attached(sandboxID string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.ips[sandboxID]
	return ok
}

// IPs returns the addresses of sandboxID as strings.
func (n *rtFakeNetwork) IPs(sandboxID string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, ip := range n.ips[sandboxID] {
		out = append(out, ip.String())
	}
	return out
}

func (n *rtFakeNetwork) PodCIDR() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.podCIDR
}

func clonePodNetwork(pn network.PodNetwork) network.PodNetwork {
	pn.PortMappings = slices.Clone(pn.PortMappings)
	if pn.Bandwidth != nil {
		bw := *pn.Bandwidth
		pn.Bandwidth = &bw
	}
	if pn.DNS != nil {
		dns := network.DNS{Servers: slices.Clone(pn.DNS.Servers), Searches: slices.Clone(pn.DNS.Searches), Options: slices.Clone(pn.DNS.Options)}
		pn.DNS = &dns
	}
	return pn
}

// rtFakeLogs is a stateful core.LogCopier: it knows which containers it copies.
type rtFakeLogs struct {
	mu        sync.Mutex
	records   map[string]logs.LogFile // recorded log files, kept across a restart
	adopt     bool                    // AdoptsLabels
	started   map[string]string       // copying now: id -> path
	stopped   []string
	reopened  []string
	waited    []string
	startErr  error
	reopenErr error
}

var _ LogCopier = (*rtFakeLogs)(nil)

func newRTFakeLogs() *rtFakeLogs {
	return &rtFakeLogs{started: map[string]string{}, records: map[string]logs.LogFile{}}
}

// restarted is the log copier of a restarted process: it keeps the records only.
func (l *rtFakeLogs) restarted() *rtFakeLogs {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := newRTFakeLogs()
	maps.Copy(n.records, l.records)
	return n
}

// Record implements LogCopier.
func (l *rtFakeLogs) Record(id string, f logs.LogFile) error {
	if err := f.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records[id] = f
	return nil
}

// Recorded implements LogCopier.
func (l *rtFakeLogs) Recorded(id string) (logs.LogFile, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.records[id]
	return f, ok
}

// Forget implements LogCopier.
func (l *rtFakeLogs) Forget(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.records, id)
}

// AdoptsLabels implements LogCopier.
func (l *rtFakeLogs) AdoptsLabels() bool { return l.adopt }

// Start implements LogCopier.
func (l *rtFakeLogs) Start(_ context.Context, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.startErr != nil {
		return l.startErr
	}
	f, ok := l.records[id]
	if !ok {
		return fmt.Errorf("no log record for %s: %w", id, cerrdefs.ErrNotFound)
	}
	l.started[id] = f.Path()
	return nil
}

// Stop implements LogCopier.
func (l *rtFakeLogs) Stop(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.started, id)
	l.stopped = append(l.stopped, id)
}

// Reopen implements LogCopier: NotFound when id is not being copied.
func (l *rtFakeLogs) Reopen(id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reopened = append(l.reopened, id)
	if l.reopenErr != nil {
		return l.reopenErr
	}
	if _, ok := l.started[id]; !ok {
		return fmt.Errorf("log of %s is not copied: %w", id, cerrdefs.ErrNotFound)
	}
	return nil
}

// Wait implements LogCopier: the fake copies instantly, so a copied container's
// output is always complete; NotFound when id is not being copied.
func (l *rtFakeLogs) Wait(ctx context.Context, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waited = append(l.waited, id)
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, ok := l.started[id]; !ok {
		return fmt.Errorf("log of %s is not copied: %w", id, cerrdefs.ErrNotFound)
	}
	return nil
}

func (l *rtFakeLogs) Waited() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.waited)
}

func (l *rtFakeLogs) Started() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]string, len(l.started))
	for k, v := range l.started {
		out[k] = v
	}
	return out
}

func (l *rtFakeLogs) Stopped() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.stopped)
}

func (l *rtFakeLogs) Reopened() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reopened)
}

func (l *rtFakeLogs) StartError(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.startErr = err
}

func (l *rtFakeLogs) ReopenError(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reopenErr = err
}
