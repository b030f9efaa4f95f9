//go:build linux

package docker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

func TestExecKilledWhenContextEnds(t *testing.T) {
	// The exec's process is a real one on this host, as it would be under the engine.
	proc := exec.Command("sleep", "60")
	assert.NilError(t, proc.Start())
	waited := make(chan error, 1)
	go func() { waited <- proc.Wait() }()
	t.Cleanup(func() { _ = proc.Process.Kill() })

	e := &execEngine{hold: true, running: 1 << 30, pid: proc.Process.Pid, output: func(_ []byte, stdout, _ io.Writer) {
		_, _ = io.WriteString(stdout, "started\n")
	}}
	c := e.client(t)
	c.inContainer = func(pid int, _ string) bool { return pid == proc.Process.Pid } // no container cgroup here
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var stdout bytes.Buffer
	code, err := c.Exec(ctx, "abc", ExecOptions{Cmd: []string{"sleep", "60"}, Stdout: &stdout})
	assert.Equal(t, code, -1)
	assert.Assert(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Assert(t, strings.HasPrefix(err.Error(), "exec in container abc: "), err.Error())
	assert.Equal(t, stdout.String(), "started\n")

	select {
	case err := <-waited:
		var exitErr *exec.ExitError
		assert.Assert(t, errors.As(err, &exitErr))
		ws, ok := exitErr.Sys().(syscall.WaitStatus)
		assert.Assert(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "%v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the exec's process was not killed")
	}
	select {
	case <-e.done: // Exec closed the hijacked connection
	case <-time.After(10 * time.Second):
		t.Fatal("the hijacked connection stayed open")
	}
}

// A process that is not the container's (a remote engine's pid, a reused pid) is
// never signalled.
func TestExecKillSparesOtherProcesses(t *testing.T) {
	proc := exec.Command("sleep", "60")
	assert.NilError(t, proc.Start())
	t.Cleanup(func() { _ = proc.Process.Kill(); _ = proc.Wait() })
	e := &execEngine{hold: true, running: 1 << 30, pid: proc.Process.Pid}
	c := e.client(t) // the real check: this sleep is in no container's cgroup
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Exec(ctx, "abc", ExecOptions{Cmd: []string{"sleep", "60"}})
	assert.Assert(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Assert(t, strings.Contains(err.Error(), "not killing it"), err.Error())
	assert.NilError(t, proc.Process.Signal(syscall.Signal(0)), "the process must live on")
}

func TestCgroupsName(t *testing.T) {
	id := strings.Repeat("ab12", 16)
	for _, tc := range []struct {
		cgroups string
		want    bool
	}{
		{"0::/system.slice/docker-" + id + ".scope\n", true},
		{"12:pids:/docker/" + id + "\n11:memory:/docker/" + id + "\n", true},
		{"0::/user.slice/user-0.slice/session-1.scope\n", false},
		{"0::/docker/" + strings.Repeat("cd34", 16) + "\n", false},
	} {
		assert.Equal(t, cgroupsName([]byte(tc.cgroups), id), tc.want, tc.cgroups)
	}
	assert.Assert(t, !cgroupsName([]byte("0::/docker/\n"), ""), "an empty id names nothing")
}

func TestExecKillIgnoresExitedProcess(t *testing.T) {
	// ESRCH: the process is gone by the time the kill comes (no pid is this high:
	// pid_max is at most 2^22).
	e := &execEngine{hold: true, running: 1 << 30, pid: 1 << 30}
	c := e.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := c.Exec(ctx, "abc", ExecOptions{Cmd: []string{"true"}})
	assert.Assert(t, errors.Is(err, context.Canceled), "%v", err)
	assert.Assert(t, !strings.Contains(err.Error(), "kill"), err.Error())
}
