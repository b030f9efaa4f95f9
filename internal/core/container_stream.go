package core

import (
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// StreamContainers is ListContainers in chunks (KEP-5825), for nodes whose list passes
// gRPC's message limit.
func (s *Service) StreamContainers(req *runtimeapi.StreamContainersRequest, ss grpc.ServerStreamingServer[runtimeapi.StreamContainersResponse]) error {
	resp, err := s.ListContainers(ss.Context(), &runtimeapi.ListContainersRequest{Filter: req.GetFilter()})
	return streamChunks(resp.GetContainers(), err, ss.Send, func(part []*runtimeapi.Container) *runtimeapi.StreamContainersResponse {
		return &runtimeapi.StreamContainersResponse{Containers: part}
	})
}
