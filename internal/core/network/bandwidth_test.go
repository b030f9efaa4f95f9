package network

import (
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestParseQuantity(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{in: "0", want: 0},
		{in: "1000", want: 1000},
		{in: "10M", want: 10_000_000},
		{in: "1Gi", want: 1 << 30},
		{in: "500k", want: 500_000},
		{in: "1.5M", want: 1_500_000},
		{in: ".5M", want: 500_000},
		{in: "5.", want: 5},
		{in: "+2k", want: 2000},
		{in: "1Ki", want: 1024},
		{in: "2Ti", want: 2 << 40},
		{in: "1e6", want: 1_000_000},
		{in: "1E3", want: 1000},
		{in: "15e-1", want: 2}, // 1.5 rounds up
		{in: "100m", want: 1},  // 0.1 rounds up
		{in: "1n", want: 1},
		{in: "1P", want: 1_000_000_000_000_000},
		{in: "-1k", err: "negative"},
		{in: "", err: "not a quantity"},
		{in: "abc", err: "not a quantity"},
		{in: "1 M", err: "not a quantity"},
		{in: "1X", err: "unknown suffix"},
		{in: "1KI", err: "unknown suffix"},
		{in: "1e", err: "unknown suffix"},
		{in: "1.2.3", err: "not a quantity"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseQuantity(tt.in)
			if invalidAsWanted(t, err, tt.err) {
				return
			}
			assert.Equal(t, got.Int64(), tt.want)
		})
	}
}

func TestBandwidthFromAnnotations(t *testing.T) {
	tests := []struct {
		name string
		ann  map[string]string
		want *Bandwidth
		err  string
	}{
		{name: "none", ann: map[string]string{"other": "1M"}},
		{name: "nil map"},
		{name: "ingress", ann: map[string]string{IngressBandwidthAnnotation: "10M"}, want: &Bandwidth{IngressRate: 10_000_000}},
		{name: "egress", ann: map[string]string{EgressBandwidthAnnotation: "1Gi"}, want: &Bandwidth{EgressRate: 1 << 30}},
		{name: "both", ann: map[string]string{IngressBandwidthAnnotation: "1k", EgressBandwidthAnnotation: "1P"},
			want: &Bandwidth{IngressRate: 1000, EgressRate: 1_000_000_000_000_000}},
		{name: "too small", ann: map[string]string{IngressBandwidthAnnotation: "999"}, err: "kubernetes.io/ingress-bandwidth: \"999\" is unreasonably small"},
		{name: "too large", ann: map[string]string{EgressBandwidthAnnotation: "2P"}, err: "kubernetes.io/egress-bandwidth: \"2P\" is unreasonably large"},
		{name: "garbage", ann: map[string]string{EgressBandwidthAnnotation: "fast"}, err: "kubernetes.io/egress-bandwidth"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BandwidthFromAnnotations(tt.ann)
			if invalidAsWanted(t, err, tt.err) {
				return
			}
			assert.DeepEqual(t, got, tt.want)
		})
	}
}

// invalidAsWanted checks err against want: nil when want is "", else an
// InvalidArgument containing want. It tells whether an error was wanted.
func invalidAsWanted(t *testing.T, err error, want string) bool {
	t.Helper()
	if want == "" {
		assert.NilError(t, err)
		return false
	}
	assert.Check(t, is.ErrorContains(err, want))
	assert.Check(t, cerrdefs.IsInvalidArgument(err))
	return true
}
