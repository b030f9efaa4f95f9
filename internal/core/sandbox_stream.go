package core

import (
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// StreamPodSandboxes is ListPodSandbox in chunks (KEP-5825).
func (s *Service) StreamPodSandboxes(req *runtimeapi.StreamPodSandboxesRequest, ss grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxesResponse]) error {
	resp, err := s.ListPodSandbox(ss.Context(), &runtimeapi.ListPodSandboxRequest{Filter: req.GetFilter()})
	return streamChunks(resp.GetItems(), err, ss.Send, func(part []*runtimeapi.PodSandbox) *runtimeapi.StreamPodSandboxesResponse {
		return &runtimeapi.StreamPodSandboxesResponse{PodSandboxes: part}
	})
}
