package core

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Attach prepares a streaming attach to a running container's main process and
// returns its URL.
func (s *Service) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	st, err := s.streamer()
	if err != nil {
		return nil, err
	}
	if err := checkStreams(req.GetStdin(), req.GetStdout(), req.GetStderr(), req.GetTty()); err != nil {
		return nil, err
	}
	c, err := s.runningContainer(ctx, req.GetContainerId())
	if err != nil {
		return nil, err
	}
	req.ContainerId = c.ID
	return st.GetAttach(req)
}
