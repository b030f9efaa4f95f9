package docker

import (
	"testing"

	"gotest.tools/v3/assert"
)

func TestCriuMissing(t *testing.T) {
	for msg, want := range map[string]bool{
		`Error response from daemon: failed to checkpoint: criu: exec: "criu": executable file not found in $PATH`: true,
		`runc checkpoint failed: fork/exec /usr/sbin/criu: no such file or directory`:                              true,
		`criu failed: type NOTIFY errno 0: dump.log: Error (criu/cr-dump.c:1234): Dumping failed`:                  false,
		`open /var/lib/docker/x: no such file or directory`:                                                        false,
	} {
		assert.Check(t, criuMissing(msg) == want, msg)
	}
}
