package docker

import (
	"context"
	"errors"
	"fmt"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want func(error) bool
	}{
		{name: "not found", err: fmt.Errorf("no such image: %w", cerrdefs.ErrNotFound), want: cerrdefs.IsNotFound},
		{name: "invalid", err: fmt.Errorf("bad: %w", cerrdefs.ErrInvalidArgument), want: cerrdefs.IsInvalidArgument},
		{name: "conflict", err: fmt.Errorf("in use: %w", cerrdefs.ErrConflict), want: cerrdefs.IsConflict},
		{name: "deadline", err: context.DeadlineExceeded, want: cerrdefs.IsDeadlineExceeded},
		{name: "unknown", err: errors.New("strange"), want: cerrdefs.IsUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := classify("op", tc.err)
			assert.Check(t, tc.want(got), "got %v", got)
			assert.Check(t, errors.Is(got, tc.err))
			assert.Equal(t, got.Error(), "op: "+tc.err.Error())
		})
	}
	assert.NilError(t, classify("op", nil))
}

func TestPullErrorRegistryUnreachable(t *testing.T) {
	err := pullError("127.0.0.1:1/x:1", errors.New(`Get "http://127.0.0.1:1/v2/": dial tcp 127.0.0.1:1: connect: connection refused`))
	assert.Check(t, errors.Is(err, ErrRegistryUnreachable))
	assert.Check(t, cerrdefs.IsUnavailable(err))

	err = pullError("x:1", fmt.Errorf("manifest unknown: %w", cerrdefs.ErrNotFound))
	assert.Check(t, !errors.Is(err, ErrRegistryUnreachable))
	assert.Check(t, cerrdefs.IsNotFound(err))
}
