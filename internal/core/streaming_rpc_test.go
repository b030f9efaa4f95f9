package core

import (
	"context"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeStreamer records the requests it was handed and answers with a URL naming them.
type fakeStreamer struct {
	execs    []*runtimeapi.ExecRequest
	attaches []*runtimeapi.AttachRequest
	forwards []*runtimeapi.PortForwardRequest
}

func (f *fakeStreamer) GetExec(req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	f.execs = append(f.execs, req)
	return &runtimeapi.ExecResponse{Url: "http://127.0.0.1:1/exec/" + req.ContainerId}, nil
}

func (f *fakeStreamer) GetAttach(req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	f.attaches = append(f.attaches, req)
	return &runtimeapi.AttachResponse{Url: "http://127.0.0.1:1/attach/" + req.ContainerId}, nil
}

func (f *fakeStreamer) GetPortForward(req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	f.forwards = append(f.forwards, req)
	return &runtimeapi.PortForwardResponse{Url: "http://127.0.0.1:1/portforward/" + req.PodSandboxId}, nil
}

func TestStreamingRPCs(t *testing.T) {
	env := newRTEnv(t)
	st := &fakeStreamer{}
	env.svc.deps.Streaming = st
	ctx := context.Background()
	sbID, sbCfg := env.webSandbox(t)
	cid := env.createContainer(t, sbID, sbCfg, rtContainerConfig("app"))

	// Not running yet: FailedPrecondition.
	_, err := env.svc.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: cid, Cmd: []string{"sh"}, Stdout: true})
	assert.Check(t, cerrdefs.IsFailedPrecondition(err), "%v", err)
	env.startContainer(t, cid)

	// A short id is resolved to the full one the stream server looks up.
	exec, err := env.svc.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: cid[:12], Cmd: []string{"sh"}, Stdin: true, Stdout: true, Tty: true})
	assert.NilError(t, err)
	assert.Equal(t, exec.Url, "http://127.0.0.1:1/exec/"+cid)
	attach, err := env.svc.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: cid, Stdout: true, Stderr: true})
	assert.NilError(t, err)
	assert.Equal(t, attach.Url, "http://127.0.0.1:1/attach/"+cid)
	pf, err := env.svc.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sbID, Port: []int32{80}})
	assert.NilError(t, err)
	assert.Equal(t, pf.Url, "http://127.0.0.1:1/portforward/"+sbID)

	for name, err := range map[string]error{
		"no command":    ignoreResp(env.svc.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: cid, Stdout: true})),
		"no stream":     ignoreResp(env.svc.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: cid, Cmd: []string{"sh"}})),
		"tty stderr":    ignoreResp(env.svc.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: cid, Tty: true, Stdout: true, Stderr: true})),
		"bad port":      ignoreResp(env.svc.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sbID, Port: []int32{70000}})),
		"sandbox id":    ignoreResp(env.svc.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: "", Cmd: []string{"sh"}, Stdout: true})),
		"empty sandbox": ignoreResp(env.svc.PortForward(ctx, &runtimeapi.PortForwardRequest{})),
	} {
		assert.Check(t, cerrdefs.IsInvalidArgument(err), "%s: %v", name, err)
	}
	_, err = env.svc.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: sbID, Cmd: []string{"sh"}, Stdout: true})
	assert.Check(t, cerrdefs.IsNotFound(err), "exec in a sandbox's pause container: %v", err)

	assert.NilError(t, stopSandbox(env, sbID))
	_, err = env.svc.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sbID, Port: []int32{80}})
	assert.Check(t, cerrdefs.IsFailedPrecondition(err), "%v", err)
	assert.Check(t, is.Len(st.execs, 1))
	assert.Check(t, is.Len(st.forwards, 1))

	env.svc.deps.Streaming = nil
	_, err = env.svc.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: cid, Stdout: true})
	assert.Check(t, cerrdefs.IsNotImplemented(err), "%v", err)
}

func ignoreResp[T any](_ T, err error) error { return err }
