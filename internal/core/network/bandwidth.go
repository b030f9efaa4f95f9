package network

import (
	"fmt"
	"math/big"
	"regexp"
	"strconv"

	cerrdefs "github.com/containerd/errdefs"
)

// The pod annotations that ask for traffic shaping, as kubelet defines them.
const (
	IngressBandwidthAnnotation = "kubernetes.io/ingress-bandwidth"
	EgressBandwidthAnnotation  = "kubernetes.io/egress-bandwidth"
)

// Limits kubelet applies to the bandwidth annotations, in bits per second.
const (
	minBandwidth = 1_000                 // 1k
	maxBandwidth = 1_000_000_000_000_000 // 1P
)

// Bandwidth is a pod's traffic shaping, passed to plugins with the "bandwidth"
// capability (such as the bandwidth plugin).
type Bandwidth struct {
	// IngressRate is the rate of traffic into the pod, in bits per second; 0 = no limit.
	IngressRate uint64
	// EgressRate is the rate of traffic out of the pod, in bits per second; 0 = no limit.
	EgressRate uint64
}

// BandwidthFromAnnotations reads the kubernetes.io/ingress-bandwidth and
// kubernetes.io/egress-bandwidth pod annotations. Values are Kubernetes quantities
// ("10M", "1Gi", "500k", "1e6"), rounded up to whole bits per second and, as kubelet
// requires, between 1k and 1P. It returns nil when neither annotation is set; errors
// wrap ErrInvalidArgument and name the annotation.
func BandwidthFromAnnotations(annotations map[string]string) (*Bandwidth, error) {
	var bw Bandwidth
	found := false
	for _, a := range []struct {
		key  string
		rate *uint64
	}{
		{IngressBandwidthAnnotation, &bw.IngressRate},
		{EgressBandwidthAnnotation, &bw.EgressRate},
	} {
		s, ok := annotations[a.key]
		if !ok {
			continue
		}
		v, err := parseBandwidth(s)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", a.key, err)
		}
		*a.rate = v
		found = true
	}
	if !found {
		return nil, nil
	}
	return &bw, nil
}

func parseBandwidth(s string) (uint64, error) {
	q, err := parseQuantity(s)
	if err != nil {
		return 0, err
	}
	if q.Cmp(big.NewInt(minBandwidth)) < 0 {
		return 0, fmt.Errorf("%q is unreasonably small (< 1kbit): %w", s, cerrdefs.ErrInvalidArgument)
	}
	if q.Cmp(big.NewInt(maxBandwidth)) > 0 {
		return 0, fmt.Errorf("%q is unreasonably large (> 1Pbit): %w", s, cerrdefs.ErrInvalidArgument)
	}
	return q.Uint64(), nil
}

// quantityRE splits a Kubernetes quantity into its signed number and its suffix.
var quantityRE = regexp.MustCompile(`^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([a-zA-Z][a-zA-Z0-9+-]*)?$`)

// quantitySuffixes are the binary and decimal SI suffixes of Kubernetes quantities.
var quantitySuffixes = map[string]*big.Rat{
	"":   big.NewRat(1, 1),
	"n":  big.NewRat(1, 1_000_000_000),
	"u":  big.NewRat(1, 1_000_000),
	"m":  big.NewRat(1, 1_000),
	"k":  big.NewRat(1_000, 1),
	"M":  big.NewRat(1_000_000, 1),
	"G":  big.NewRat(1_000_000_000, 1),
	"T":  big.NewRat(1_000_000_000_000, 1),
	"P":  big.NewRat(1_000_000_000_000_000, 1),
	"E":  big.NewRat(1_000_000_000_000_000_000, 1),
	"Ki": big.NewRat(1<<10, 1),
	"Mi": big.NewRat(1<<20, 1),
	"Gi": big.NewRat(1<<30, 1),
	"Ti": big.NewRat(1<<40, 1),
	"Pi": big.NewRat(1<<50, 1),
	"Ei": big.NewRat(1<<60, 1),
}

var exponentRE = regexp.MustCompile(`^[eE]([+-]?[0-9]{1,3})$`)

// parseQuantity parses a Kubernetes resource quantity and returns its value rounded up
// to an integer, like resource.Quantity.Value.
func parseQuantity(s string) (*big.Int, error) {
	m := quantityRE.FindStringSubmatch(s)
	if m == nil {
		return nil, fmt.Errorf("%q is not a quantity: %w", s, cerrdefs.ErrInvalidArgument)
	}
	number, suffix := m[1], m[2]
	if number[len(number)-1] == '.' {
		number += "0"
	}
	v, ok := new(big.Rat).SetString(number)
	if !ok {
		return nil, fmt.Errorf("%q is not a quantity: %w", s, cerrdefs.ErrInvalidArgument)
	}
	if mult, ok := quantitySuffixes[suffix]; ok {
		v.Mul(v, mult)
	} else if e := exponentRE.FindStringSubmatch(suffix); e != nil {
		exp, _ := strconv.Atoi(e[1])
		pow := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(exp))), nil)
		if exp >= 0 {
			v.Mul(v, new(big.Rat).SetInt(pow))
		} else {
			v.Quo(v, new(big.Rat).SetInt(pow))
		}
	} else {
		return nil, fmt.Errorf("%q has an unknown suffix %q: %w", s, suffix, cerrdefs.ErrInvalidArgument)
	}
	if v.Sign() < 0 {
		return nil, fmt.Errorf("%q is negative: %w", s, cerrdefs.ErrInvalidArgument)
	}
	// Round up, as Kubernetes does.
	q, r := new(big.Int).QuoRem(v.Num(), v.Denom(), new(big.Int))
	if r.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q, nil
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
