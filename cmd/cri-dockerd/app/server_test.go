package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gotest.tools/v3/assert"
)

func TestInterceptorConvertsErrdefsOnce(t *testing.T) {
	log := quietLogger()
	ic := &interceptor{log: log, timeout: time.Minute}
	tests := []struct {
		err  error
		code codes.Code
	}{
		{err: fmt.Errorf("image reference is empty: %w", cerrdefs.ErrInvalidArgument), code: codes.InvalidArgument},
		{err: fmt.Errorf("list images: %w", cerrdefs.ErrUnavailable), code: codes.Unavailable},
		{err: fmt.Errorf("x: %w", cerrdefs.ErrNotFound), code: codes.NotFound},
		{err: fmt.Errorf("in use: %w", cerrdefs.ErrConflict), code: codes.FailedPrecondition},
		{err: context.DeadlineExceeded, code: codes.DeadlineExceeded},
		{err: errors.New("plain"), code: codes.Unknown},
	}
	for _, tc := range tests {
		_, err := ic.unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/runtime.v1.ImageService/ListImages"},
			func(context.Context, any) (any, error) { return nil, tc.err })
		assert.Equal(t, status.Code(err), tc.code, tc.err.Error())
		assert.Equal(t, status.Convert(err).Message(), tc.err.Error())
	}
}

func TestInterceptorDeadlines(t *testing.T) {
	log := quietLogger()
	ic := &interceptor{log: log, timeout: time.Minute}
	deadline := func(method string) bool {
		var has bool
		_, _ = ic.unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: method},
			func(ctx context.Context, _ any) (any, error) { _, has = ctx.Deadline(); return nil, nil })
		return has
	}
	assert.Check(t, deadline("/runtime.v1.ImageService/ListImages"))
	assert.Check(t, !deadline("/runtime.v1.ImageService/PullImage"), "pulls are bounded by the progress deadline instead")
}

func TestPolling(t *testing.T) {
	for rpc, want := range map[string]bool{
		"ListImages": true, "ImageStatus": true, "ImageFsInfo": true, "Version": true, "Status": true,
		"PullImage": false, "RemoveImage": false, "RunPodSandbox": false,
	} {
		assert.Equal(t, polling(rpc), want, rpc)
	}
}

// quietLogger is a logger that discards what it gets.
func quietLogger() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}
