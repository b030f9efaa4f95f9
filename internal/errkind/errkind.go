// Package errkind gives an error exactly one errdefs kind and a message that starts
// with the operation, while keeping the cause reachable through errors.Is and
// errors.As. The adapters that turn a library's errors into errdefs kinds (the Docker
// SDK's in internal/core/docker, libcni's in internal/core/network) build their
// errors with it, so the server's one conversion to gRPC codes sees one kind.
package errkind

import (
	"context"
	"errors"
)

// Error is an error with one errdefs kind.
type Error struct {
	kind  error
	msg   string
	cause error
}

func (e *Error) Error() string { return e.msg }

// Unwrap returns the kind and the cause.
func (e *Error) Unwrap() []error { return []error{e.kind, e.cause} }

// Cause is the error the kind was given to.
func (e *Error) Cause() error { return e.cause }

// New gives cause the kind kind; its message is "op: cause", or cause's own message
// when op is "".
func New(kind error, op string, cause error) *Error {
	msg := cause.Error()
	if op != "" {
		msg = op + ": " + msg
	}
	return WithMessage(kind, msg, cause)
}

// WithMessage gives cause the kind kind and the message msg.
func WithMessage(kind error, msg string, cause error) *Error {
	return &Error{kind: kind, msg: msg, cause: cause}
}

// Context returns the context error err carries (context.DeadlineExceeded or
// context.Canceled); nil when it carries none.
func Context(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return context.Canceled
	}
	return nil
}
