package core

import (
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// StreamImages is ListImages in chunks (KEP-5825), pins included: one evaluation of the
// pins for the whole list, so that no chunk sees another state of them.
func (s *Service) StreamImages(req *runtimeapi.StreamImagesRequest, ss grpc.ServerStreamingServer[runtimeapi.StreamImagesResponse]) error {
	resp, err := s.ListImages(ss.Context(), &runtimeapi.ListImagesRequest{Filter: req.GetFilter()})
	return streamChunks(resp.GetImages(), err, ss.Send, func(part []*runtimeapi.Image) *runtimeapi.StreamImagesResponse {
		return &runtimeapi.StreamImagesResponse{Images: part}
	})
}
