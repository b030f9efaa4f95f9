package pinner

import (
	"context"
	"fmt"
	"testing"

	"github.com/dockpin/cri-dockerd/pinning/pin"
)

// benchPatterns are ~20 patterns of every form.
var benchPatterns = []string{
	"registry.k8s.io/pause:3.10",
	"docker.io/rancher/mirrored-pause:3.6",
	"busybox:1.36",
	"quay.io/org/app7:v1",
	"nginx@sha256:" + fmt.Sprintf("%064x", 7),
	"app42@sha256:" + fmt.Sprintf("%064x", 42),
	"sha256:" + fmt.Sprintf("%064x", 99),
	"sha256:" + fmt.Sprintf("%064x", 1234567),
	"busybox",
	"quay.io/org/app13",
	"team3/svc17",
	"registry.k8s.io/*",
	"busybox*",
	"rancher/*",
	"myorg/app*",
	"ghcr.io/org/tool1*",
	"*pause*",
	"*coredns*",
	"*-debug*",
	"*sha256:00000000000000000000000000000000000000000000000000000000000012*",
}

// benchImages builds n images, each with 2 tags, 1 digest and some config labels.
func benchImages(n int) []pin.Image {
	imgs := make([]pin.Image, n)
	for i := range imgs {
		repo := fmt.Sprintf("team%d/svc%d", i%10, i)
		switch i % 4 {
		case 1:
			repo = fmt.Sprintf("quay.io/org/app%d", i)
		case 2:
			repo = fmt.Sprintf("registry.example.com:5000/proj/img%d", i)
		case 3:
			repo = fmt.Sprintf("library%d", i)
		}
		imgs[i] = pin.Image{
			ID:          fmt.Sprintf("sha256:%064x", i+1000000),
			RepoTags:    []string{repo + ":v1", fmt.Sprintf("%s:1.%d", repo, i%7)},
			RepoDigests: []string{fmt.Sprintf("%s@sha256:%064x", repo, i)},
			Labels: map[string]string{
				"org.opencontainers.image.source": "https://example.com/" + repo,
				"maintainer":                      "ops",
			},
		}
		if i%50 == 0 {
			imgs[i].Labels[pin.PinnedLabel] = pin.PinnedValue
		}
	}
	return imgs
}

func BenchmarkEvaluate(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("images=%d", n), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Patterns = benchPatterns
			cfg.LabelSelectors = []string{"tier=infra", "com.example.keep"}
			p, err := New(cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			imgs := benchImages(n)
			ctx := context.Background()
			if _, err := p.Evaluate(ctx, imgs); err != nil { // warm the normalisation cache
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := p.Evaluate(ctx, imgs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEvaluateCold measures the first ListImages after start: nothing cached.
func BenchmarkEvaluateCold(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Patterns = benchPatterns
	imgs := benchImages(5000)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, err := New(cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Evaluate(ctx, imgs); err != nil {
			b.Fatal(err)
		}
	}
}
