//go:build linux

package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

// startSleep starts a real process on this host, as an exec's would be under the
// engine, and returns it with the result of its Wait.
func startSleep(t *testing.T) (*exec.Cmd, <-chan error) {
	t.Helper()
	proc := exec.Command("sleep", "60")
	assert.NilError(t, proc.Start())
	waited := make(chan error, 1)
	go func() { waited <- proc.Wait() }()
	t.Cleanup(func() { _ = proc.Process.Kill() })
	return proc, waited
}

// assertKilled checks that the process whose Wait result comes on waited was killed
// with SIGKILL and that Exec then closed the hijacked connection (done).
func assertKilled(t *testing.T, waited <-chan error, done <-chan struct{}) {
	t.Helper()
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
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the hijacked connection stayed open")
	}
}

func TestExecKilledWhenContextEnds(t *testing.T) {
	// The exec's process is a real one on this host, as it would be under the engine.
	proc, waited := startSleep(t)

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

	assertKilled(t, waited, e.done)
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

// A process that closed its stdout and stderr and runs on (sh -c 'exec >&- 2>&-;
// sleep 1000'): its output stream ends, and Exec waits for it to exit. When ctx ends
// meanwhile (ExecSync's timeout, the client gone), the process is killed, Exec closes
// the hijacked connection, and no goroutine of the relay is left: the stdin copy
// ends as soon as the caller's stdin does (the streaming server ends it when Exec
// returns; a Read blocked in it cannot be interrupted).
func TestExecOutputClosedProcessRunsOnContextEnds(t *testing.T) {
	for _, withStdin := range []bool{false, true} {
		t.Run(fmt.Sprintf("stdin=%v", withStdin), func(t *testing.T) {
			proc, waited := startSleep(t)

			e := &execEngine{endOutput: true, running: 1 << 30, pid: proc.Process.Pid, output: func(_ []byte, stdout, _ io.Writer) {
				_, _ = io.WriteString(stdout, "started\n")
			}}
			c := e.client(t)
			c.inContainer = func(pid int, _ string) bool { return pid == proc.Process.Pid }
			opts := ExecOptions{Cmd: []string{"sh", "-c", "exec >&- 2>&-; sleep 1000"}}
			var stdout syncBuffer
			opts.Stdout = &stdout
			// The caller's stdin stays open and silent until the caller ends it.
			stdinR, stdinW := io.Pipe()
			if withStdin {
				opts.Stdin = stdinR
			}
			// ctx ends (the client goes away) once Exec, its output over, has found
			// the process running twice.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				defer cancel()
				for ctx.Err() == nil {
					e.mu.Lock()
					polled := e.inspect
					e.mu.Unlock()
					if polled >= 2 {
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
			code, err := c.Exec(ctx, "abc", opts)
			assert.Equal(t, code, -1)
			assert.Assert(t, errors.Is(err, context.Canceled), "%v", err)
			assert.Equal(t, stdout.String(), "started\n")

			// The engine reads until the client closes the connection: stdin has not
			// ended (no close-write), so only Exec's close ends it.
			assertKilled(t, waited, e.done)
			_ = stdinW.Close() // as the streaming server does once Exec returned
			waitNoGoroutine(t, "docker.hijackedSession.relay")
		})
	}
}

// waitNoGoroutine waits until no goroutine's stack has fn in it, failing the test
// when one is still there after a generous while.
func waitNoGoroutine(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, fn) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a goroutine in %s is left:\n%s", fn, stacks)
		}
	}
}
