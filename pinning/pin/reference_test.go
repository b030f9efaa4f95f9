package pin

import (
	"fmt"
	"sync"
	"testing"

	"gotest.tools/v3/assert"
)

func TestNormalizeRef(t *testing.T) {
	tests := []struct {
		in   string
		want *NormRef // nil: skipped
	}{
		{in: "pause:3.10", want: &NormRef{
			name: "docker.io/library/pause", tagKey: "docker.io/library/pause:3.10",
			full: "docker.io/library/pause:3.10"}},
		{in: "docker.io/library/pause:3.10", want: &NormRef{
			name: "docker.io/library/pause", tagKey: "docker.io/library/pause:3.10",
			full: "docker.io/library/pause:3.10"}},
		{in: "rancher/mirrored-pause:3.6", want: &NormRef{
			name: "docker.io/rancher/mirrored-pause", tagKey: "docker.io/rancher/mirrored-pause:3.6",
			full: "docker.io/rancher/mirrored-pause:3.6"}},
		{in: "registry.k8s.io/pause:3.10", want: &NormRef{
			name: "registry.k8s.io/pause", tagKey: "registry.k8s.io/pause:3.10",
			full: "registry.k8s.io/pause:3.10"}},
		{in: "busybox@" + digA, want: &NormRef{
			name: "docker.io/library/busybox", digKey: "docker.io/library/busybox@" + digA,
			digest: digA, full: "docker.io/library/busybox@" + digA}},
		{in: "busybox:1@" + digA, want: &NormRef{
			name: "docker.io/library/busybox", tagKey: "docker.io/library/busybox:1",
			digKey: "docker.io/library/busybox@" + digA, digest: digA,
			full: "docker.io/library/busybox:1@" + digA}},
		{in: "busybox", want: &NormRef{name: "docker.io/library/busybox", full: "docker.io/library/busybox"}},
		{in: "<none>:<none>"},
		{in: "<none>@<none>"},
		{in: ""},
		{in: "Upper:1"},
		{in: "bad ref"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got := NormalizeRef(tc.in)
			if tc.want == nil {
				assert.Assert(t, got == nil, "got %+v", got)
				return
			}
			assert.Equal(t, refFields(got), refFields(tc.want))
		})
	}
}

func TestRefCacheReusesAndBounds(t *testing.T) {
	c := NewRefCache(3)
	first := c.Get("busybox:1")
	assert.Assert(t, first == c.Get("busybox:1"), "cached value must be reused")
	assert.Assert(t, c.Get("<none>:<none>") == nil)
	c.Get("alpine:3")
	assert.Equal(t, c.len(), 3)
	c.Get("nginx:1") // over the bound: the cache starts again
	assert.Equal(t, c.len(), 1)
	assert.Equal(t, c.Get("busybox:1").full, "docker.io/library/busybox:1")
}

func TestRefCacheConcurrent(t *testing.T) {
	c := NewRefCache(50)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				ref := fmt.Sprintf("img%d:%d", (i+g)%80, i%3)
				r := c.Get(ref)
				assert.Check(t, r != nil && r.full == "docker.io/library/"+ref)
			}
		})
	}
	wg.Wait()
	assert.Assert(t, c.len() <= 50)
}

func TestAppendImageRefsSkipsPlaceholders(t *testing.T) {
	img := &Image{
		RepoTags:    []string{"<none>:<none>", "busybox:1", "NOT VALID"},
		RepoDigests: []string{"<none>@<none>", "busybox@" + digA},
	}
	refs := AppendImageRefs(NewRefCache(10), nil, img)
	assert.Equal(t, len(refs), 2)
	assert.Equal(t, refs[0].full, "docker.io/library/busybox:1")
	assert.Equal(t, refs[1].full, "docker.io/library/busybox@"+digA)
}

func refFields(r *NormRef) [5]string {
	return [5]string{r.name, r.tagKey, r.digKey, r.digest, r.full}
}
