package core

import (
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// StreamPodSandboxStats is ListPodSandboxStats in chunks (KEP-5825).
func (s *Service) StreamPodSandboxStats(req *runtimeapi.StreamPodSandboxStatsRequest, ss grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxStatsResponse]) error {
	resp, err := s.ListPodSandboxStats(ss.Context(), &runtimeapi.ListPodSandboxStatsRequest{Filter: req.GetFilter()})
	return streamChunks(resp.GetStats(), err, ss.Send, func(part []*runtimeapi.PodSandboxStats) *runtimeapi.StreamPodSandboxStatsResponse {
		return &runtimeapi.StreamPodSandboxStatsResponse{PodSandboxStats: part}
	})
}
