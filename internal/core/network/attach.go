package network

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/sirupsen/logrus"

	"github.com/dockpin/cri-dockerd/internal/logctx"
)

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
	rt := runtimeConf(pn, pn.NetNS, cidrs)
	// The loopback plugin only touches lo, the network's plugins eth0 and the host:
	// they are run at once (upstream runs one after the other), the pod waits for the
	// slower only.
	var res types.Result
	loErr, netErr := both(
		func() error { _, err := m.cni.AddNetworkList(ctx, m.loopback, lo); return err },
		func() (err error) { res, err = m.cni.AddNetworkList(ctx, nc.list, rt); return err },
	)
	if loErr != nil || netErr != nil {
		m.undo(ctx, log, nc.list, rt, lo)
		var errs []error
		if loErr != nil {
			errs = append(errs, classify(op+": loopback", loErr))
		}
		if netErr != nil {
			errs = append(errs, classify(fmt.Sprintf("%s: network %q", op, nc.list.Name), netErr))
		}
		return Result{}, errors.Join(errs...)
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
// never set up, succeeds. Loopback is deleted as recorded too: upstream cri-dockerd's
// entry (cni-loopback-<id>-eth0, which is never taken for the pod network) and ours
// (under lo); a failure of the loopback plugin is only logged, as upstream.
func (m *Manager) TearDown(ctx context.Context, pn PodNetwork) error {
	if err := pn.validate(false); err != nil {
		return err
	}
	log := logctx.For(ctx, m.log).WithFields(logrus.Fields{"sandbox": pn.SandboxID, "pod": pn.Namespace + "/" + pn.Name})
	netns := pn.NetNS
	if netns != "" {
		if _, err := os.Stat(netns); errors.Is(err, os.ErrNotExist) {
			log.WithField("netns", netns).Debug("network namespace is gone, deleting without it")
			netns = ""
		}
	}

	// The pod network and loopback are deleted at once, as they were added.
	pod, loopback := m.cachedAttachments(log, pn.SandboxID)
	err, _ := both(
		func() error { return m.deletePod(ctx, log, pn, netns, pod) },
		func() error { m.deleteLoopback(ctx, log, pn, netns, loopback); return nil },
	)
	if err != nil {
		return err
	}
	log.Info("pod network torn down")
	return nil
}

// deletePod deletes the pod network (eth0) of a sandbox as recorded in libcni's cache
// (pod), else with the current configuration; see TearDown.
func (m *Manager) deletePod(ctx context.Context, log logrus.FieldLogger, pn PodNetwork, netns string, pod []*libcni.NetworkAttachment) error {
	op := "tear down network of sandbox " + pn.SandboxID
	var errs []error
	done := false
	for _, att := range pod {
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
	return errors.Join(errs...)
}

// deleteLoopback deletes a sandbox's loopback attachments: upstream's as recorded
// (loopback), then ours. A failure is only logged, as upstream.
func (m *Manager) deleteLoopback(ctx context.Context, log logrus.FieldLogger, pn PodNetwork, netns string, loopback []*libcni.NetworkAttachment) {
	// Upstream's loopback attachment (recorded under eth0), then ours (under lo).
	for _, att := range loopback {
		list, err := libcni.NetworkConfFromBytes(att.Config)
		if err != nil || len(list.Plugins) == 0 {
			list = m.loopback
		}
		rt := &libcni.RuntimeConf{ContainerID: pn.SandboxID, NetNS: netns, IfName: att.IfName, Args: att.CniArgs, CapabilityArgs: att.CapabilityArgs}
		if err := m.cni.DelNetworkList(ctx, list, rt); err != nil {
			log.WithError(err).WithField("interface", att.IfName).Warn("tear down pod loopback")
		}
	}
	if err := m.cni.DelNetworkList(ctx, m.loopback, m.loopbackConf(pn, netns)); err != nil {
		log.WithError(err).Warn("tear down pod loopback")
	}
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

// both runs a and b at once and returns their errors.
func both(a, b func() error) (errA, errB error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		errB = b()
	}()
	errA = a()
	<-done
	return errA, errB
}
