package network

import (
	"context"
	"fmt"
	"net"
	"sort"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/containernetworking/cni/libcni"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/internal/logctx"
)

// PodNetworkStatus returns the sandbox's addresses from the result its SetUp recorded in
// libcni's cache (in --cni-cache-dir), so it needs no exec and survives a restart of the
// shim, and also works for sandboxes set up by upstream cri-dockerd with the same cache
// directory. Only the pod network's entries count: upstream records its loopback network
// under the pod's interface name too (cni-loopback-<id>-eth0), and that result is never
// the pod's. Of several pod network entries (the configuration changed while the pod ran)
// the current network's comes first, then the first with addresses. It returns
// ErrNotFound when nothing is recorded for the sandbox.
func (m *Manager) PodNetworkStatus(ctx context.Context, sandboxID string) (Result, error) {
	if sandboxID == "" {
		return Result{}, fmt.Errorf("pod network status: no sandbox ID: %w", cerrdefs.ErrInvalidArgument)
	}
	op := "network status of sandbox " + sandboxID
	log := logctx.For(ctx, m.log).WithField("sandbox", sandboxID)
	pod, _ := m.cachedAttachments(log, sandboxID)
	m.mu.Lock()
	if m.current != nil {
		current := m.current.list.Name
		sort.SliceStable(pod, func(i, j int) bool { return pod[i].Network == current && pod[j].Network != current })
	}
	m.mu.Unlock()
	var found *Result
	for _, att := range pod {
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
		if len(r.IPs) > 0 {
			return r, nil
		}
		if found == nil {
			found = &r
		}
	}
	if found != nil {
		return *found, nil
	}
	return Result{}, fmt.Errorf("%s: no network attachment recorded: %w", op, cerrdefs.ErrNotFound)
}

// cachedAttachments returns libcni's cache entries of the sandbox's pod interface (eth0):
// the pod network's, and the loopback network's that upstream cri-dockerd records under
// eth0 as well (ours is recorded under lo).
func (m *Manager) cachedAttachments(log logrus.FieldLogger, sandboxID string) (pod, loopback []*libcni.NetworkAttachment) {
	all, err := m.cni.GetCachedAttachments(sandboxID)
	if err != nil {
		log.WithError(err).Warn("read CNI cache")
		return nil, nil
	}
	for _, a := range all {
		if a.IfName != PodInterface || a.ContainerID != sandboxID {
			continue
		}
		if isLoopback(a) {
			loopback = append(loopback, a)
		} else {
			pod = append(pod, a)
		}
	}
	return pod, loopback
}

// isLoopback reports whether a cached attachment is of a loopback network: upstream's
// network name, or a configuration whose plugins are all the loopback plugin.
func isLoopback(a *libcni.NetworkAttachment) bool {
	if a.Network == loopbackNetwork {
		return true
	}
	list, err := libcni.NetworkConfFromBytes(a.Config)
	if err != nil || len(list.Plugins) == 0 {
		return false
	}
	for _, p := range list.Plugins {
		if p.Network == nil || p.Network.Type != loopbackType {
			return false
		}
	}
	return true
}

// toResult picks the pod interface's addresses out of a plugin result: the IPs that
// name an interface called eth0 inside the sandbox, or all IPs when none names one
// (results of plugins that report no interfaces). Loopback addresses are never the
// pod's. IPv4 come before IPv6.
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
		if ip == nil || ip.Address.IP == nil || ip.Address.IP.IsLoopback() {
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

// Attached tells whether libcni's cache records an attachment of the sandbox, its
// pod network's or its loopback's; true when the cache cannot be read.
func (m *Manager) Attached(sandboxID string) bool {
	all, err := m.cni.GetCachedAttachments(sandboxID)
	return err != nil || len(all) > 0
}
