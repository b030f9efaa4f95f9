package core

import (
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// StreamPodSandboxStats is ListPodSandboxStats in chunks (KEP-5825).
func (s *Service) StreamPodSandboxStats(req *runtimeapi.StreamPodSandboxStatsRequest, ss grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxStatsResponse]) error {
	resp, err := s.ListPodSandboxStats(ss.Context(), &runtimeapi.ListPodSandboxStatsRequest{Filter: req.GetFilter()})
	if err != nil {
		return err
	}
	return sendChunks(resp.GetStats(), func(part []*runtimeapi.PodSandboxStats) error {
		return ss.Send(&runtimeapi.StreamPodSandboxStatsResponse{PodSandboxStats: part})
	})
}
