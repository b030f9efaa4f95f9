//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// removeRaceCalls is how many RemoveImage of one image critest's spec makes at once.
const removeRaceCalls = 5

// TestRemoveImageRace: critest's "should not fail on simultaneous RemoveImage calls",
// E2E_REMOVE_RACE_ROUNDS times (default 50, the acceptance) in a row: the image
// is pulled from the local registry, its ID taken from ImageStatus, then five
// RemoveImage of that ID at once; each call, once it returned, must succeed and find
// the image gone by ImageStatus (by ID, as critest checks, and by tag) and ListImages,
// and so must a last check after all of them. The calls that lose the race get NotFound
// from the engine, and the image cache used to keep showing the image to them. Every
// round runs; the rounds that failed are counted, and the round times logged.
func TestRemoveImageRace(t *testing.T) {
	s := startShim(t)
	ctx := context.Background()
	rounds := envInt("E2E_REMOVE_RACE_ROUNDS", 50)
	ref := env.registry + "/" + env.store + "/remove-race:1"
	importImage(t, ref)
	docker(t, "push", "-q", ref)
	docker(t, "rmi", ref)
	removeAtEnd(t, ref)

	var failed []int
	var pulls, removals, totals []time.Duration
	for round := range rounds {
		start := time.Now()
		_, err := s.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec(ref)})
		assert.NilError(t, err, "round %d", round)
		pulled := time.Now()
		st, err := s.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec(ref)})
		assert.NilError(t, err, "round %d", round)
		assert.Assert(t, st.GetImage() != nil, "round %d: ImageStatus of the pulled image is empty", round)
		id := st.GetImage().GetId()

		removing := time.Now()
		problems := make(chan string, removeRaceCalls*4+4)
		var wg sync.WaitGroup
		for call := range removeRaceCalls {
			wg.Go(func() {
				_, err := s.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: spec(id)})
				if err != nil {
					problems <- fmt.Sprintf("call %d: RemoveImage: %v", call, err)
					return
				}
				for _, p := range removedImageShown(ctx, s, id, ref) {
					problems <- fmt.Sprintf("call %d, once it returned: %s", call, p)
				}
			})
		}
		wg.Wait()
		removed := time.Now()
		for _, p := range removedImageShown(ctx, s, id, ref) {
			problems <- "after every call returned: " + p
		}
		close(problems)
		ok := true
		for p := range problems {
			ok = false
			t.Errorf("round %d (image %.19s): %s", round, id, p)
		}
		if !ok {
			failed = append(failed, round)
		}
		pulls, removals, totals = append(pulls, pulled.Sub(start)), append(removals, removed.Sub(removing)), append(totals, time.Since(start))
	}
	t.Logf("store %s: %d of %d rounds failed %v; per round (min/median/max): pull %s, %d removals at once %s, whole round %s",
		env.store, len(failed), rounds, failed, spread(pulls), removeRaceCalls, spread(removals), spread(totals))
}

// removedImageShown says how the shim still shows a removed image: ImageStatus by ID
// and by tag, ListImages (nothing when it shows none of it).
func removedImageShown(ctx context.Context, s *shim, id, ref string) []string {
	var out []string
	for _, r := range []string{id, ref} {
		st, err := s.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec(r)})
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("ImageStatus(%s): %v", r, err))
		case st.GetImage() != nil:
			out = append(out, fmt.Sprintf("ImageStatus(%s) still finds %.19s", r, st.GetImage().GetId()))
		}
	}
	list, err := s.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return append(out, fmt.Sprintf("ListImages: %v", err))
	}
	if slices.ContainsFunc(list.GetImages(), func(img *runtimeapi.Image) bool { return img.GetId() == id }) {
		out = append(out, "ListImages still lists it")
	}
	return out
}

// spread is "min/median/max" of ds, rounded to the millisecond.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Sorted(slices.Values(ds))
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("%v/%v/%v", r(s[0]), r(s[len(s)/2]), r(s[len(s)-1]))
}
