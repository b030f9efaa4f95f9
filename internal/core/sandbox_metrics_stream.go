package core

import (
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// StreamPodSandboxMetrics is ListPodSandboxMetrics in chunks (KEP-5825).
func (s *Service) StreamPodSandboxMetrics(_ *runtimeapi.StreamPodSandboxMetricsRequest, ss grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxMetricsResponse]) error {
	resp, err := s.ListPodSandboxMetrics(ss.Context(), &runtimeapi.ListPodSandboxMetricsRequest{})
	return streamChunks(resp.GetPodMetrics(), err, ss.Send, func(part []*runtimeapi.PodSandboxMetrics) *runtimeapi.StreamPodSandboxMetricsResponse {
		return &runtimeapi.StreamPodSandboxMetricsResponse{PodSandboxMetrics: part}
	})
}
