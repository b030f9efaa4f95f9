package pinning

import (
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/dockpin/cri-dockerd/pinning/sticky"
)

func TestLeaseFor(t *testing.T) {
	for _, root := range []string{"", DefaultRootDirectory, DefaultRootDirectory + "/", "/var/lib/../lib/cri-dockerd"} {
		assert.Check(t, is.Equal(LeaseFor(root), sticky.DefaultLeaseID), root)
	}
	a, b := LeaseFor("/run/node-a"), LeaseFor("/run/node-b")
	assert.Check(t, is.Regexp(`^dockpin\.pinned\.[0-9a-f]{12}$`, a))
	assert.Check(t, a != b, "two root directories, two owners")
	assert.Check(t, is.Equal(LeaseFor("/run/node-a/"), a), "one directory, one owner, however written")
}
