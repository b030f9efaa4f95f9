package logctx

import (
	"context"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestPhasesAddUpByName(t *testing.T) {
	ctx, p := WithPhases(context.Background())
	for range 2 {
		done := Time(ctx, "engine.containers.inspect")
		time.Sleep(time.Millisecond)
		done()
	}
	Time(ctx, "checkpoint.write")()

	f := p.Fields()
	assert.Check(t, is.Len(f, 2))
	inspect, _ := f["t.engine.containers.inspect"].(string)
	assert.Check(t, strings.HasSuffix(inspect, "ms/2"), inspect)
	write, _ := f["t.checkpoint.write"].(string)
	assert.Check(t, strings.HasSuffix(write, "ms") && !strings.Contains(write, "/"), write)
	assert.Check(t, p.Total() >= 2*time.Millisecond)
}

func TestTimeWithoutPhasesDoesNothing(t *testing.T) {
	Time(context.Background(), "engine.info")() // no panic, nothing recorded anywhere
}
