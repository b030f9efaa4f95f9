package docker

import (
	"context"
	"net/http"
	"testing"

	"gotest.tools/v3/assert"
)

func TestInfoCDI(t *testing.T) {
	body := `{"CDISpecDirs":["/etc/cdi"],"DiscoveredDevices":[{"Source":"cdi","ID":"vendor.com/gpu=0"},{"Source":"other","ID":"x"}]}`
	for _, tc := range []struct {
		api      string
		reported bool
	}{{"1.51", true}, {"1.49", false}} {
		c := testEngine(t, tc.api, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) })
		info, err := c.Info(context.Background())
		assert.NilError(t, err)
		assert.DeepEqual(t, info.CDISpecDirs, []string{"/etc/cdi"})
		assert.DeepEqual(t, info.CDIDevices, []string{"vendor.com/gpu=0"})
		assert.Equal(t, info.CDIDevicesReported, tc.reported, tc.api)
	}
}
