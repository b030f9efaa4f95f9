package core

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// UpdateRuntimeConfig takes the node's pod CIDR from kubelet and hands it to the
// network plugin (CNI's ipRanges capability).
func (s *Service) UpdateRuntimeConfig(ctx context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	cidr := req.GetRuntimeConfig().GetNetworkConfig().GetPodCidr()
	if cidr == "" || s.deps.Network == nil {
		return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
	}
	if err := s.deps.Network.SetPodCIDR(cidr); err != nil {
		return nil, err
	}
	s.logger(ctx).WithField("podCIDR", cidr).Info("pod CIDR updated")
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}
