package errkind

import (
	"context"
	"errors"
	"fmt"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
)

func TestNewKeepsKindAndCause(t *testing.T) {
	cause := errors.New("boom")
	err := New(cerrdefs.ErrNotFound, "inspect x", cause)
	assert.Equal(t, err.Error(), "inspect x: boom")
	assert.Assert(t, cerrdefs.IsNotFound(err))
	assert.Assert(t, errors.Is(err, cause))
	assert.Equal(t, err.Cause(), cause)
	assert.Equal(t, New(cerrdefs.ErrUnknown, "", cause).Error(), "boom")
}

func TestContext(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{fmt.Errorf("call: %w", context.DeadlineExceeded), context.DeadlineExceeded},
		{fmt.Errorf("call: %w", context.Canceled), context.Canceled},
		{errors.New("other"), nil},
	} {
		assert.Equal(t, Context(tc.err), tc.want)
	}
}
