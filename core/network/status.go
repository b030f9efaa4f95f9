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

	"github.com/dockpin/cri-dockerd/logctx"
)

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
