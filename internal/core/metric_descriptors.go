package core

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListMetricDescriptors describes the metrics ListPodSandboxMetrics reports, which
// kubelet exports on /metrics/cadvisor (upstream does not implement it).
func (s *Service) ListMetricDescriptors(ctx context.Context, _ *runtimeapi.ListMetricDescriptorsRequest) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	if s.deps.Metrics == nil {
		return nil, fmt.Errorf("metrics are not enabled: %w", cerrdefs.ErrNotImplemented)
	}
	descs := s.deps.Metrics.Descriptors()
	s.logger(ctx).WithField("count", len(descs)).Debug("listed metric descriptors")
	return &runtimeapi.ListMetricDescriptorsResponse{Descriptors: descs}, nil
}
