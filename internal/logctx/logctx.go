package logctx

import (
	"context"
	"io"

	"github.com/sirupsen/logrus"
)

type key struct{}

// With returns ctx carrying l as its request logger.
func With(ctx context.Context, l logrus.FieldLogger) context.Context {
	return context.WithValue(ctx, key{}, l)
}

// G returns the request logger ctx carries, or a logger that discards when it
// carries none.
func G(ctx context.Context) logrus.FieldLogger {
	if l, ok := ctx.Value(key{}).(logrus.FieldLogger); ok {
		return l
	}
	return Discard()
}

// For returns the logger for work a component does for ctx: the request logger ctx
// carries, with the fields of the component's logger base added (e.g. its
// "component"), or base itself when ctx carries none. A nil base discards.
func For(ctx context.Context, base logrus.FieldLogger) logrus.FieldLogger {
	req, ok := ctx.Value(key{}).(logrus.FieldLogger)
	if !ok {
		return OrDiscard(base)
	}
	if e, ok := base.(*logrus.Entry); ok && len(e.Data) > 0 {
		return req.WithFields(e.Data)
	}
	return req
}

// OrDiscard returns l, or a logger that discards when l is nil.
func OrDiscard(l logrus.FieldLogger) logrus.FieldLogger {
	if l == nil {
		return Discard()
	}
	return l
}

// Discard returns a logger that writes nothing.
func Discard() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}
