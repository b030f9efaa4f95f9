package core

import (
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// StreamPodSandboxMetrics is ListPodSandboxMetrics in chunks (KEP-5825).
func (s *Service) StreamPodSandboxMetrics(_ *runtimeapi.StreamPodSandboxMetricsRequest, ss grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxMetricsResponse]) error {
	resp, err := s.ListPodSandboxMetrics(ss.Context(), &runtimeapi.ListPodSandboxMetricsRequest{})
	if err != nil {
		return err
	}
	return sendChunks(resp.GetPodMetrics(), func(part []*runtimeapi.PodSandboxMetrics) error {
		return ss.Send(&runtimeapi.StreamPodSandboxMetricsResponse{PodSandboxMetrics: part})
	})
}
