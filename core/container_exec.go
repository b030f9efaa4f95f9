package core

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Exec prepares a streaming exec in a running container and returns its URL
// (kubelet proxies `kubectl exec` to it).
func (s *Service) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	st, err := s.streamer()
	if err != nil {
		return nil, err
	}
	if len(req.GetCmd()) == 0 {
		return nil, fmt.Errorf("exec needs a command: %w", cerrdefs.ErrInvalidArgument)
	}
	if err := checkStreams(req.GetStdin(), req.GetStdout(), req.GetStderr(), req.GetTty()); err != nil {
		return nil, err
	}
	c, err := s.runningContainer(ctx, req.GetContainerId())
	if err != nil {
		return nil, err
	}
	req.ContainerId = c.ID
	return st.GetExec(req)
}
