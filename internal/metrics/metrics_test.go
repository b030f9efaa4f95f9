package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/dockpin/cri-dockerd/internal/core/imagecache"
	"github.com/dockpin/cri-dockerd/internal/core/logs"
	"github.com/dockpin/cri-dockerd/pinning/pinner"
)

// fakePins is a PinHealth whose state the test sets.
type fakePins struct{ h pinner.Health }

func (f *fakePins) Health() pinner.Health { return f.h }

func TestPinMetrics(t *testing.T) {
	pins := &fakePins{}
	m := New(Build{Version: "0.4.3+dockpin.1.gabc1234", Commit: "abc1234", UpstreamRelease: "0.4.3"})
	m.WatchPins(pins)

	// Before any evaluation: zeros, no timestamp, no source.
	assert.NilError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP cri_dockerd_pin_evaluation_images Images in the most recent pin evaluation (ListImages or ImageStatus).
# TYPE cri_dockerd_pin_evaluation_images gauge
cri_dockerd_pin_evaluation_images 0
`), "cri_dockerd_pin_evaluation_images", "cri_dockerd_pin_evaluation_timestamp_seconds", "cri_dockerd_pin_source_state"))

	at := time.Unix(1700000000, 0)
	pins.h = pinner.Health{
		EvaluatedAt: at, Images: 12, Pinned: 3,
		PinnedBySource:      map[string]int{"pattern": 2, "containerd-label": 1},
		Sources:             []pinner.SourceHealth{{Name: "containerd-label", State: pinner.SourceStale, LastRefresh: at.Add(-time.Minute)}},
		PreloadArchives:     map[string]int{pinner.OriginLoaded: 2, pinner.OriginSaved: 1},
		PreloadRefs:         map[string]int{pinner.OriginLoaded: 5, pinner.OriginSaved: 1},
		PreloadStates:       map[string]int{pinner.PreloadLoaded: 2, pinner.PreloadFailed: 1},
		PreloadLoadFailures: 3, PreloadUnread: 1,
	}
	assert.NilError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP cri_dockerd_pinned_images Images pinned in the most recent pin evaluation, by source (an image counts once for each of its sources).
# TYPE cri_dockerd_pinned_images gauge
cri_dockerd_pinned_images{source="containerd-label"} 1
cri_dockerd_pinned_images{source="pattern"} 2
# HELP cri_dockerd_pin_evaluation_pinned_images Images pinned by any source in the most recent pin evaluation.
# TYPE cri_dockerd_pin_evaluation_pinned_images gauge
cri_dockerd_pin_evaluation_pinned_images 3
# HELP cri_dockerd_pin_evaluation_timestamp_seconds When the most recent pin evaluation ran (absent before the first).
# TYPE cri_dockerd_pin_evaluation_timestamp_seconds gauge
cri_dockerd_pin_evaluation_timestamp_seconds 1.7e+09
# HELP cri_dockerd_pin_source_state 1 for the state a pin source is in (healthy, stale, expired, never read), 0 for the others.
# TYPE cri_dockerd_pin_source_state gauge
cri_dockerd_pin_source_state{source="containerd-label",state="expired"} 0
cri_dockerd_pin_source_state{source="containerd-label",state="healthy"} 0
cri_dockerd_pin_source_state{source="containerd-label",state="never read"} 0
cri_dockerd_pin_source_state{source="containerd-label",state="stale"} 1
# HELP cri_dockerd_pin_source_last_refresh_timestamp_seconds When a pin source last answered (or its saved state was taken); its staleness is time() minus this.
# TYPE cri_dockerd_pin_source_last_refresh_timestamp_seconds gauge
cri_dockerd_pin_source_last_refresh_timestamp_seconds{source="containerd-label"} 1.69999994e+09
# HELP cri_dockerd_preload_archives Files of the preload directory (archives and .txt lists), by where their pins come from (loaded; manifest: not loaded (yet), read; saved: not loaded (yet, or unreadable), as at their last good load; listed: a list; none: pinning nothing (yet)).
# TYPE cri_dockerd_preload_archives gauge
cri_dockerd_preload_archives{origin="loaded"} 2
cri_dockerd_preload_archives{origin="saved"} 1
# HELP cri_dockerd_preload_pinned_refs References the preload archives pin, by origin (as cri_dockerd_preload_archives).
# TYPE cri_dockerd_preload_pinned_refs gauge
cri_dockerd_preload_pinned_refs{origin="loaded"} 5
cri_dockerd_preload_pinned_refs{origin="saved"} 1
# HELP cri_dockerd_preload_files Files of the preload directory by state (pending, loaded, failed, ...).
# TYPE cri_dockerd_preload_files gauge
cri_dockerd_preload_files{state="failed"} 1
cri_dockerd_preload_files{state="loaded"} 2
# HELP cri_dockerd_preload_load_failures Failed loads in a row of the preload archives failing now, summed (each is retried with backoff; crictl info shows when).
# TYPE cri_dockerd_preload_load_failures gauge
cri_dockerd_preload_load_failures 3
# HELP cri_dockerd_preload_unread_files Preload files present at start whose content is not read yet; while above 0 every image is reported pinned.
# TYPE cri_dockerd_preload_unread_files gauge
cri_dockerd_preload_unread_files 1
`), "cri_dockerd_pinned_images", "cri_dockerd_pin_evaluation_pinned_images", "cri_dockerd_pin_evaluation_timestamp_seconds",
		"cri_dockerd_pin_source_state", "cri_dockerd_pin_source_last_refresh_timestamp_seconds",
		"cri_dockerd_preload_archives", "cri_dockerd_preload_pinned_refs", "cri_dockerd_preload_files",
		"cri_dockerd_preload_load_failures", "cri_dockerd_preload_unread_files"))
}

// get returns the status and body of url.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	assert.NilError(t, err)
	resp, err := http.DefaultClient.Do(req)
	assert.NilError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	assert.NilError(t, err)
	return resp.StatusCode, string(b)
}

func TestListenServesMetricsAndPprofOnlyWhenAsked(t *testing.T) {
	for _, withPprof := range []bool{false, true} {
		m := New(Build{Version: "v", Commit: "c", UpstreamRelease: "0.4.3"})
		srv, err := Listen("127.0.0.1:0", m, withPprof, logrus.New())
		assert.NilError(t, err)
		base := "http://" + srv.Addr().String()
		code, body := get(t, base+"/metrics")
		assert.Equal(t, code, http.StatusOK)
		assert.Check(t, is.Contains(body, `cri_dockerd_build_info{commit="c",upstream_release="0.4.3",version="v"} 1`))
		assert.Check(t, is.Contains(body, "go_goroutines "))
		assert.Check(t, is.Contains(body, "process_start_time_seconds "))
		code, _ = get(t, base+"/debug/pprof/")
		want := http.StatusNotFound
		if withPprof {
			want = http.StatusOK
		}
		assert.Check(t, is.Equal(code, want), "pprof %v", withPprof)
		assert.NilError(t, srv.Close())
	}
}

// fakeCache is an ImageCacheStats whose state the test sets.
type fakeCache struct{ st imagecache.Stats }

func (f *fakeCache) Stats() imagecache.Stats { return f.st }

func TestImageCacheMetrics(t *testing.T) {
	c := &fakeCache{st: imagecache.Stats{State: imagecache.StateStarting}}
	m := New(Build{})
	m.WatchImageCache(c)
	names := []string{"cri_dockerd_image_cache_images", "cri_dockerd_image_cache_state", "cri_dockerd_image_cache_resyncs_total", "cri_dockerd_image_cache_last_resync_timestamp_seconds"}
	assert.NilError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP cri_dockerd_image_cache_images Images in the image cache's index.
# TYPE cri_dockerd_image_cache_images gauge
cri_dockerd_image_cache_images 0
# HELP cri_dockerd_image_cache_resyncs_total Full reconciliations of the index with the engine's image list.
# TYPE cri_dockerd_image_cache_resyncs_total counter
cri_dockerd_image_cache_resyncs_total 0
# HELP cri_dockerd_image_cache_state 1 for the state the image cache is in (starting, live: answering from its index, fallback: calling the engine), 0 for the others.
# TYPE cri_dockerd_image_cache_state gauge
cri_dockerd_image_cache_state{state="fallback"} 0
cri_dockerd_image_cache_state{state="live"} 0
cri_dockerd_image_cache_state{state="starting"} 1
`), names...))
	c.st = imagecache.Stats{State: imagecache.StateLive, Images: 7, Resyncs: 2, LastResync: time.Unix(1700000000, 0)}
	assert.NilError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP cri_dockerd_image_cache_images Images in the image cache's index.
# TYPE cri_dockerd_image_cache_images gauge
cri_dockerd_image_cache_images 7
# HELP cri_dockerd_image_cache_last_resync_timestamp_seconds When the index was last reconciled with the engine (absent before the first).
# TYPE cri_dockerd_image_cache_last_resync_timestamp_seconds gauge
cri_dockerd_image_cache_last_resync_timestamp_seconds 1.7e+09
# HELP cri_dockerd_image_cache_resyncs_total Full reconciliations of the index with the engine's image list.
# TYPE cri_dockerd_image_cache_resyncs_total counter
cri_dockerd_image_cache_resyncs_total 2
# HELP cri_dockerd_image_cache_state 1 for the state the image cache is in (starting, live: answering from its index, fallback: calling the engine), 0 for the others.
# TYPE cri_dockerd_image_cache_state gauge
cri_dockerd_image_cache_state{state="fallback"} 0
cri_dockerd_image_cache_state{state="live"} 1
cri_dockerd_image_cache_state{state="starting"} 0
`), names...))
}

// fakeStreams is an OpenSessions with fixed counts.
type fakeStreams map[string]int64

func (f fakeStreams) OpenSessions() map[string]int64 { return f }

func TestStreamingMetrics(t *testing.T) {
	m := New(Build{})
	m.WatchStreaming(fakeStreams{"exec": 2, "attach": 0, "portforward": 1})
	assert.NilError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP cri_dockerd_streaming_sessions Streaming sessions running now, by kind (exec, attach, portforward).
# TYPE cri_dockerd_streaming_sessions gauge
cri_dockerd_streaming_sessions{kind="attach"} 0
cri_dockerd_streaming_sessions{kind="exec"} 2
cri_dockerd_streaming_sessions{kind="portforward"} 1
`), "cri_dockerd_streaming_sessions"))
}

// fakeLogs is a LogStats with fixed totals.
type fakeLogs logs.Stats

func (f fakeLogs) Stats() logs.Stats { return logs.Stats(f) }

func TestLogMetrics(t *testing.T) {
	m := New(Build{})
	m.WatchLogs(fakeLogs{Copying: 4, Lines: 10, Bytes: 1000, Dropped: 2})
	assert.NilError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP cri_dockerd_log_copiers Containers whose engine log is being copied into their CRI log file now.
# TYPE cri_dockerd_log_copiers gauge
cri_dockerd_log_copiers 4
# HELP cri_dockerd_log_bytes_written_total Bytes of CRI log lines written.
# TYPE cri_dockerd_log_bytes_written_total counter
cri_dockerd_log_bytes_written_total 1000
# HELP cri_dockerd_log_lines_dropped_total CRI log lines that could not be written (a full disk, say).
# TYPE cri_dockerd_log_lines_dropped_total counter
cri_dockerd_log_lines_dropped_total 2
# HELP cri_dockerd_log_lines_written_total CRI log lines (full or partial) written.
# TYPE cri_dockerd_log_lines_written_total counter
cri_dockerd_log_lines_written_total 10
`), "cri_dockerd_log_copiers", "cri_dockerd_log_lines_written_total", "cri_dockerd_log_bytes_written_total", "cri_dockerd_log_lines_dropped_total"))
}

// A method name the CRI does not have (the pin proxy forwards any) counts under
// "unknown": names a client makes up make no series of their own.
func TestUnknownMethodsShareOneSeries(t *testing.T) {
	m := New(Build{})
	unary, _ := m.Instrument()
	ok := func(context.Context, any) (any, error) { return nil, nil }
	for _, method := range []string{"/runtime.v1.RuntimeService/Version", "/made.Up/Name1", "/made.Up/Name2"} {
		_, err := unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: method}, ok)
		assert.NilError(t, err)
	}
	var out strings.Builder
	mfs, err := m.reg.Gather()
	assert.NilError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "grpc_server_handled_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "grpc_method" {
					out.WriteString(l.GetValue() + " ")
				}
			}
		}
	}
	assert.Equal(t, out.String(), "Version unknown ")
}

func TestLoopback(t *testing.T) {
	assert.Check(t, loopback(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}))
	assert.Check(t, loopback(&net.TCPAddr{IP: net.IPv6loopback}))
	assert.Check(t, !loopback(&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3)}))
	assert.Check(t, !loopback(&net.TCPAddr{IP: net.IPv4zero}))
}
