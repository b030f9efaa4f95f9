package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// TestTablesGolden: the three tables of a made-up run (three rounds of ours and upstream, two of a
// baseline, a warm-up run that must not count, phases lines with every duration form). The golden
// file is what hack/bench-lifecycle.sh's jq programs printed for the same folder before this tool
// replaced them.
func TestTablesGolden(t *testing.T) {
	var out bytes.Buffer
	for _, c := range []string{"table", "usage", "phases"} {
		assert.NilError(t, run([]string{c, "testdata/out", "classic"}, &out))
		if c != "phases" {
			out.WriteString("===\n")
		}
	}
	want, err := os.ReadFile("testdata/classic.golden")
	assert.NilError(t, err)
	assert.Equal(t, out.String(), string(want))
}

func TestQuantile(t *testing.T) {
	v := []float64{5, 1, 4, 2, 3}
	assert.Equal(t, quantile(v, 0.5), 3.0)
	assert.Equal(t, quantile(v, 0.9), 5.0)               // round(4*0.9) = 4
	assert.Equal(t, quantile([]float64{1, 2}, 0.5), 2.0) // round(0.5) = 1: half away from zero, as jq
	assert.DeepEqual(t, v, []float64{5, 1, 4, 2, 3})     // not sorted in place
}

func TestParsePhases(t *testing.T) {
	p, err := parsePhases(`level=debug msg="request phases" rpc=RunPodSandbox duration=100ms t.engine.start=60ms ` +
		`t.engine.inspect="4ms/2" t.cni.loopback.add=10ms t.cni.net.add=20ms t.cni.net.other=5ms t.checkpoint.write=500µs`)
	assert.NilError(t, err)
	assert.Equal(t, p.op, "RunPodSandbox")
	assert.Equal(t, p.engine, 62.0) // 60 + 4/2
	assert.Equal(t, p.cni, 25.0)    // the longer of loopback (10) and the pod network (20+5)
	assert.Equal(t, p.files, 0.5)
	assert.Equal(t, p.me, 100-62-25-0.5)

	p, err = parsePhases(`msg="request phases" rpc=StopPodSandbox duration=10ms t.engine.stop=30ms`)
	assert.NilError(t, err)
	assert.Equal(t, p.engine, 10.0, "engine calls that ran beside each other count at most the RPC")

	_, err = parsePhases(`msg="request phases" rpc=X duration=ten`)
	assert.Check(t, is.ErrorContains(err, `duration "ten"`))
}

func TestEmptyAndBadInput(t *testing.T) {
	var out bytes.Buffer
	assert.NilError(t, run([]string{"phases", t.TempDir(), "classic"}, &out))
	assert.Equal(t, out.String(), "", "no phases lines: no table")
	err := run([]string{"tables", "x", "y"}, &out)
	assert.Check(t, is.ErrorContains(err, "unknown command"))
	err = run([]string{"table"}, &out)
	assert.Check(t, strings.Contains(err.Error(), "usage"))
}
