package core

import (
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// StreamContainerStats is ListContainerStats in chunks (KEP-5825).
func (s *Service) StreamContainerStats(req *runtimeapi.StreamContainerStatsRequest, ss grpc.ServerStreamingServer[runtimeapi.StreamContainerStatsResponse]) error {
	resp, err := s.ListContainerStats(ss.Context(), &runtimeapi.ListContainerStatsRequest{Filter: req.GetFilter()})
	return streamChunks(resp.GetStats(), err, ss.Send, func(part []*runtimeapi.ContainerStats) *runtimeapi.StreamContainerStatsResponse {
		return &runtimeapi.StreamContainerStatsResponse{ContainerStats: part}
	})
}
