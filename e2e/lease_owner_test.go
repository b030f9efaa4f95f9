//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"
)

// TestTwoInstancesOneEngine: two instances of our binary (two root directories) on
// one engine, each pinning its own image, for E2E_TWO_INSTANCES_SECONDS (default 60):
// each has a lease of its own, and through `docker image prune -a` every few seconds
// (which deletes both images' records) each keeps its own image (restored from its
// lease; the prunes touch only the sticky tests' images) and never releases the other's.
func TestTwoInstancesOneEngine(t *testing.T) {
	requireContainerdStore(t)
	a, b := stickyImage(t, "e2e/owner-a:1"), stickyImage(t, "e2e/owner-b:1")
	sa := startShim(t, "--restore-pinned-images=true", "--pinned-images", "e2e/owner-a:1")
	sb := startShim(t, "--restore-pinned-images=true", "--pinned-images", "e2e/owner-b:1")
	assert.Assert(t, sa.leaseOf(t) != sb.leaseOf(t), "one lease per instance: %s", sa.leaseOf(t))
	assert.Check(t, strings.HasPrefix(sa.leaseOf(t), "dockpin.pinned."), sa.leaseOf(t))
	waitLeased(t, sa, a, true)
	waitLeased(t, sb, b, true)
	end := time.Now().Add(time.Duration(envInt("E2E_TWO_INSTANCES_SECONDS", 60)) * time.Second)
	prunes := 0
	for time.Now().Before(end) {
		docker(t, "image", "prune", "-a", "-f", "--filter", "label="+stickyLabel+"=1")
		prunes++
		// Each keeper reconciles on the delete events; a SIGHUP makes both reconcile
		// at once besides, so that their reconciles interleave.
		sa.signal(t, syscall.SIGHUP)
		sb.signal(t, syscall.SIGHUP)
		for _, c := range []struct {
			s  *shim
			id string
		}{{sa, a}, {sb, b}} {
			waitImage(t, c.id)
			_, mine := leased(t, c.s)[c.id]
			assert.Check(t, mine, "%s's lease lost its own image", c.s.leaseOf(t))
		}
		_, crossA := leased(t, sa)[b]
		_, crossB := leased(t, sb)[a]
		assert.Check(t, !crossA && !crossB, "a lease holds the other instance's image")
		time.Sleep(5 * time.Second)
	}
	waitListPinned(t, sa, a, true)
	waitListPinned(t, sb, b, true)
	t.Logf("two instances, leases %s and %s: %d prunes, each image restored from its own lease every time", sa.leaseOf(t), sb.leaseOf(t), prunes)
}

// waitImage waits until the engine has the image id again.
func waitImage(t *testing.T, id string) {
	t.Helper()
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if _, err := dockerErr(nil, "image", "inspect", "--format", "{{.Id}}", id); err != nil {
			return poll.Continue("image %s not restored yet: %v", id, err)
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(200*time.Millisecond))
}

// TestPinningOffFreesContent: an instance that leased an image, started again with
// containerd-label pinning off (so no keeper keeps its lease in step), gives the lease
// back by itself: the image deleted, its content is collected.
func TestPinningOffFreesContent(t *testing.T) {
	requireContainerdStore(t)
	id := stickyImage(t, "e2e/off-frees:1")
	s := startShim(t, "--restore-pinned-images=true", "--pinned-images", "e2e/off-frees:1")
	waitLeased(t, s, id, true)
	lease := s.leaseOf(t)
	s.stop(t)

	off := startShim(t, "--cri-dockerd-root-directory", s.root, "--pin-from-containerd-labels=false", "--pinned-images", "e2e/off-frees:1")
	off.lease = lease // its Status says the lease is off; the lease of that root directory is the one to watch
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if n := len(leased(t, off)); n > 0 {
			return poll.Continue("lease %s still holds %d blobs", lease, n)
		}
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(200*time.Millisecond))
	assert.Check(t, is.Contains(off.log(t), "given back"), fmt.Sprintf("lease %s", lease))
	docker(t, "rmi", "e2e/off-frees:1")
	waitContentGone(t, id)
}
