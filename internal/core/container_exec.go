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
	var noCmd error
	if len(req.GetCmd()) == 0 {
		noCmd = fmt.Errorf("exec needs a command: %w", cerrdefs.ErrInvalidArgument)
	}
	st, id, err := s.streamTarget(ctx, req, noCmd)
	if err != nil {
		return nil, err
	}
	req.ContainerId = id
	return st.GetExec(req)
}
