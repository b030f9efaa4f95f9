package streaming

import (
	"context"
	"fmt"
	"net"
	"os"
	goruntime "runtime"

	cerrdefs "github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// dialInNetns dials port on loopback inside the network namespace at nsPath
// (/proc/<pid>/ns/net). When that is the caller's own namespace (a host-network
// sandbox) it dials directly. Otherwise a dedicated goroutine locks its OS thread,
// enters the namespace with setns, dials and returns to its own namespace; if it
// cannot return, the thread stays locked and dies with the goroutine, so no other
// goroutine ever runs in the wrong namespace.
func dialInNetns(ctx context.Context, nsPath string, port int32) (net.Conn, error) {
	target, err := os.Open(nsPath)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("network namespace %s is gone: %w", nsPath, cerrdefs.ErrFailedPrecondition)
		}
		return nil, fmt.Errorf("open network namespace: %w", err)
	}
	defer target.Close()

	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		goruntime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			goruntime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("open own network namespace: %w", err)}
			return
		}
		defer own.Close()
		same, err := sameFile(own, target)
		if err != nil {
			goruntime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		if same {
			goruntime.UnlockOSThread()
			conn, err := dialLoopback(ctx, port)
			ch <- result{conn, err}
			return
		}
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			goruntime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("enter network namespace %s: %w", nsPath, err)}
			return
		}
		conn, dialErr := dialLoopback(ctx, port)
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
			// Keep the thread locked: it ends with this goroutine.
			if conn != nil {
				_ = conn.Close()
			}
			ch <- result{err: fmt.Errorf("leave network namespace %s: %w", nsPath, err)}
			return
		}
		goruntime.UnlockOSThread()
		ch <- result{conn, dialErr}
	}()
	r := <-ch
	return r.conn, r.err
}

// sameFile tells whether two open namespace files are the same namespace.
func sameFile(a, b *os.File) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Fstat(int(a.Fd()), &sa); err != nil {
		return false, fmt.Errorf("stat network namespace: %w", err)
	}
	if err := unix.Fstat(int(b.Fd()), &sb); err != nil {
		return false, fmt.Errorf("stat network namespace: %w", err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}
