package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dockpin/cri-dockerd/internal/core/docker"
)

// maxExecSyncOutput bounds what ExecSync keeps of each stream (kubelet's own limit
// for probe output is far lower; the gRPC message limit is 16 MiB).
const maxExecSyncOutput = 4 << 20

// ExecSync runs a command in a running container and returns its output and exit
// code. When the timeout passes first the command is killed (upstream leaves it
// running) and DeadlineExceeded returned.
func (s *Service) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	if len(req.GetCmd()) == 0 {
		return nil, fmt.Errorf("exec needs a command: %w", cerrdefs.ErrInvalidArgument)
	}
	c, err := s.runningContainer(ctx, req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if t := req.GetTimeout(); t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(t)*time.Second)
		defer cancel()
	}
	stdout := &limitedBuffer{max: maxExecSyncOutput}
	stderr := &limitedBuffer{max: maxExecSyncOutput}
	code, err := s.deps.Docker.Exec(ctx, c.ID, docker.ExecOptions{Cmd: req.GetCmd(), Stdout: stdout, Stderr: stderr})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("command %q timed out after %ds and was killed: %w", req.GetCmd(), req.GetTimeout(), context.DeadlineExceeded)
		}
		return nil, fmt.Errorf("exec in container %s: %w", c.ID, err)
	}
	return &runtimeapi.ExecSyncResponse{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: int32(code)}, nil // exit codes fit in int32
}

// limitedBuffer keeps the first max bytes written to it and drops the rest. It is an
// io.Writer only, so that no io.ReaderFrom or io.StringWriter can bypass the limit.
type limitedBuffer struct {
	buf bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// Bytes returns what was kept.
func (b *limitedBuffer) Bytes() []byte { return b.buf.Bytes() }
