package main

import (
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

func TestNmeterLine(t *testing.T) {
	at := time.Date(2026, 12, 3, 21, 5, 9, 123456789, time.UTC)
	for format, want := range map[string]string{
		"%3t":       "21:05:09.123",
		"%t":        "21:05:09",
		"%9t|%%":    "21:05:09.123456789|%",
		"at %1t ok": "at 21:05:09.1 ok",
		"%12t":      "21:05:09.123456789",
	} {
		got, err := nmeterLine(format, at)
		assert.NilError(t, err, format)
		assert.Equal(t, got, want, format)
	}
	for _, bad := range []string{"%c", "%3", "%"} {
		_, err := nmeterLine(bad, at)
		assert.ErrorContains(t, err, "", bad)
	}
}
