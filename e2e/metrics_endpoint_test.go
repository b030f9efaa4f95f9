//go:build e2e

package e2e

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// scrape is one read of /metrics.
type scrape map[string]*dto.MetricFamily

// value is the sum of the samples of metric (a counter, a gauge, or a histogram's count) whose
// labels include labels ("k", "v", …); 0 when there is none.
func (s scrape) value(metric string, labels ...string) float64 {
	fam := s[metric]
	if fam == nil {
		return 0
	}
	sum := 0.0
	for _, m := range fam.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, kv []string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if have[kv[i]] != kv[i+1] {
			return false
		}
	}
	return true
}

// httpDo sends a request to url with client and returns the status and body.
func httpDo(t testing.TB, client *http.Client, method, url string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
	assert.NilError(t, err)
	resp, err := client.Do(req)
	assert.NilError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	assert.NilError(t, err)
	return resp.StatusCode, b
}

// httpGet returns the status and body of a GET of url (a loopback address of the shim's).
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	code, b := httpDo(t, http.DefaultClient, http.MethodGet, url)
	return code, string(b)
}

func scrapeMetrics(t *testing.T, base string) scrape {
	t.Helper()
	code, body := httpGet(t, base+"/metrics")
	assert.Equal(t, code, http.StatusOK)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	assert.NilError(t, err)
	return fams
}

// metricsAddr is the address the shim logged it serves metrics on (it was given port 0).
func metricsAddr(t testing.TB, s *shim) string {
	t.Helper()
	re := regexp.MustCompile(`msg="serving metrics at /metrics".*address="?(127\.0\.0\.1:\d+)`)
	var addr string
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		m := re.FindStringSubmatch(s.log(t))
		if m == nil {
			return poll.Continue("no 'serving metrics' line in the log yet")
		}
		addr = m[1]
		return poll.Success()
	})
	return addr
}

// TestMetricsEndpoint: --metrics-address serves Prometheus metrics whose values follow the
// traffic: per-method counts by gRPC code and latency histograms, the pin evaluation by
// source; the image cache; the build information; Go and process metrics; and pprof with
// --enable-pprof.
func TestMetricsEndpoint(t *testing.T) {
	pinnedID := importImage(t, "e2e/metrics-pinned:1")
	importImage(t, "e2e/metrics-unpinned:1")
	s := startShim(t, "--metrics-address", "127.0.0.1:0", "--enable-pprof", "--pinned-images", "e2e/metrics-pinned:1")
	base := "http://" + metricsAddr(t, s)
	ctx := context.Background()

	const listImages, containerStatus = "ListImages", "ContainerStatus"
	before := scrapeMetrics(t, base)
	assert.Check(t, is.Equal(before.value("cri_dockerd_build_info"), 1.0))
	assert.Check(t, before.value("go_goroutines") > 0)
	assert.Check(t, before.value("process_resident_memory_bytes") > 0)
	// Every method has its series from the start.
	assert.Check(t, before["grpc_server_started_total"] != nil)
	assert.Check(t, is.Equal(before.value("grpc_server_started_total", "grpc_method", "RemoveImage"), 0.0))

	const n = 3
	var images []*runtimeapi.Image
	for range n {
		resp, err := s.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
		assert.NilError(t, err)
		images = resp.GetImages()
	}
	_, err := s.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "no-such-container"})
	assert.Check(t, err != nil)

	after := scrapeMetrics(t, base)
	delta := func(metric string, labels ...string) float64 {
		return after.value(metric, labels...) - before.value(metric, labels...)
	}
	assert.Check(t, is.Equal(delta("grpc_server_handled_total", "grpc_method", listImages, "grpc_code", "OK"), float64(n)))
	assert.Check(t, is.Equal(delta("grpc_server_handling_seconds", "grpc_method", listImages), float64(n)))
	assert.Check(t, is.Equal(delta("grpc_server_handled_total", "grpc_method", containerStatus, "grpc_code", "NotFound"), 1.0))
	assert.Check(t, is.Equal(delta("grpc_server_handled_total", "grpc_method", "RemoveImage"), 0.0))

	// The pin evaluation of the last ListImages: every image, ours pinned by its pattern.
	assert.Check(t, is.Equal(after.value("cri_dockerd_pin_evaluation_images"), float64(len(images))))
	pinned := 0.0
	for _, img := range images {
		if img.GetPinned() {
			pinned++
		}
		if img.GetId() == pinnedID {
			assert.Check(t, img.GetPinned(), "the image pinned by --pinned-images")
		}
	}
	assert.Check(t, is.Equal(after.value("cri_dockerd_pin_evaluation_pinned_images"), pinned))
	assert.Check(t, after.value("cri_dockerd_pinned_images", "source", "pinned-images") >= 1,
		"pinned by source: %v", after["cri_dockerd_pinned_images"])
	assert.Check(t, after.value("cri_dockerd_pin_evaluation_timestamp_seconds") > 0)

	// The image cache (on by default) goes live and indexes at least our two images.
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if v := scrapeMetrics(t, base).value("cri_dockerd_image_cache_state", "state", "live"); v != 1 {
			return poll.Continue("image cache not live yet")
		}
		return poll.Success()
	})
	assert.Check(t, after.value("cri_dockerd_image_cache_images") >= 2)
	assert.Check(t, after.value("cri_dockerd_image_cache_resyncs_total") >= 1)
	assert.Check(t, after["cri_dockerd_streaming_sessions"] != nil)
	assert.Check(t, after["cri_dockerd_log_lines_written_total"] != nil)
	assert.Check(t, is.Equal(after.value("cri_dockerd_streaming_sessions", "kind", "exec"), 0.0))

	code, body := httpGet(t, base+"/debug/pprof/")
	assert.Check(t, is.Equal(code, http.StatusOK))
	assert.Check(t, is.Contains(body, "goroutine"))
}

// TestMetricsProxy: the pin proxy serves metrics too: the RPCs it forwards, counted by method
// and code, and its own pins.
func TestMetricsProxy(t *testing.T) {
	importImage(t, "e2e/metrics-proxy:1")
	be := startShim(t)
	p := startProxy(t, be, "--metrics-address", "127.0.0.1:0", "--pinned-images", "e2e/metrics-proxy:1")
	base := "http://" + metricsAddr(t, p)
	ctx := context.Background()

	before := scrapeMetrics(t, base)
	_, err := p.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	assert.NilError(t, err)
	_, err = p.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "no-such-container"})
	assert.Check(t, err != nil)
	after := scrapeMetrics(t, base)
	delta := func(metric string, labels ...string) float64 {
		return after.value(metric, labels...) - before.value(metric, labels...)
	}
	assert.Check(t, is.Equal(delta("grpc_server_handled_total", "grpc_method", "ListImages", "grpc_code", "OK"), 1.0))
	assert.Check(t, is.Equal(delta("grpc_server_handled_total", "grpc_method", "ContainerStatus", "grpc_code", "NotFound"), 1.0))
	assert.Check(t, after.value("cri_dockerd_pinned_images", "source", "pinned-images") >= 1)
	assert.Check(t, after["cri_dockerd_streaming_sessions"] == nil, "the proxy forwards streams: it has no sessions of its own")
}
