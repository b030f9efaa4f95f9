package logctx

import (
	"bytes"
	"context"
	"testing"

	"github.com/sirupsen/logrus"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// recorder returns a logger writing JSON lines into the returned buffer.
func recorder() (*logrus.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	l := logrus.New()
	l.SetOutput(&buf)
	l.SetFormatter(&logrus.JSONFormatter{DisableTimestamp: true})
	return l, &buf
}

func TestG(t *testing.T) {
	root, buf := recorder()
	ctx := With(context.Background(), root.WithFields(logrus.Fields{"rpc": "ListImages", "req_id": "7"}))
	G(ctx).Info("hello")
	assert.Check(t, is.Equal(buf.String(), `{"level":"info","msg":"hello","req_id":"7","rpc":"ListImages"}`+"\n"))

	G(context.Background()).Error("nobody hears this") // no logger: discarded, no panic
}

func TestFor(t *testing.T) {
	root, buf := recorder()
	component := root.WithField("component", "cni")

	For(context.Background(), component).Info("outside a request")
	assert.Check(t, is.Equal(buf.String(), `{"component":"cni","level":"info","msg":"outside a request"}`+"\n"))

	buf.Reset()
	ctx := With(context.Background(), root.WithFields(logrus.Fields{"rpc": "RunPodSandbox", "req_id": "9"}))
	For(ctx, component).Info("inside")
	assert.Check(t, is.Equal(buf.String(), `{"component":"cni","level":"info","msg":"inside","req_id":"9","rpc":"RunPodSandbox"}`+"\n"))

	buf.Reset()
	For(ctx, root).Info("plain base")
	assert.Check(t, is.Equal(buf.String(), `{"level":"info","msg":"plain base","req_id":"9","rpc":"RunPodSandbox"}`+"\n"))

	For(context.Background(), nil).Info("discarded")
	assert.Check(t, is.Equal(buf.String(), `{"level":"info","msg":"plain base","req_id":"9","rpc":"RunPodSandbox"}`+"\n"))
}

func TestOrDiscard(t *testing.T) {
	root, buf := recorder()
	OrDiscard(root).Warn("kept")
	assert.Check(t, is.Contains(buf.String(), "kept"))
	OrDiscard(nil).Warn("gone")
	assert.Check(t, !bytes.Contains(buf.Bytes(), []byte("gone")))
	Discard().Error("gone too")
}
