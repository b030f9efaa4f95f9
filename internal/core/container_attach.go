package core

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Attach prepares a streaming attach to a running container's main process and
// returns its URL.
func (s *Service) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	st, id, err := s.streamTarget(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	req.ContainerId = id
	return st.GetAttach(req)
}
