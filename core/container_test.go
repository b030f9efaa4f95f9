package core

import (
	"testing"

	"gotest.tools/v3/assert"
)

func TestIsCDIName(t *testing.T) {
	for name, want := range map[string]bool{
		"vendor.com/class=name":     true,
		"nvidia.com/gpu=all":        true,
		"example.org/fpga=dev:0.1":  true,
		"/dev/fuse":                 false,
		"":                          false,
		"vendor.com/class":          false,
		"vendor.com/class=":         false,
		"/class=name":               false,
		"vendor.com/=name":          false,
		"vendor.com/a/b=name":       false,
		"vendor.com/class=na/me":    false,
		"vendor.com/class=name=two": false,
	} {
		assert.Equal(t, isCDIName(name), want, name)
	}
}
