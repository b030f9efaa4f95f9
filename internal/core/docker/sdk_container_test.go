package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/dockpin/cri-dockerd/internal/errkind"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestContainerErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		status  int
		kind    func(error) bool
		message string
		call    func(c *SDKClient) error
	}{
		{name: "create with a taken name", status: http.StatusConflict, kind: cerrdefs.IsAlreadyExists, message: "create container k8s_POD_x: ",
			call: func(c *SDKClient) error {
				return errOf(c.CreateContainer(ctx, ContainerSpec{Name: "k8s_POD_x", Image: "pause"}))
			}},
		{name: "create from a missing image", status: http.StatusNotFound, kind: cerrdefs.IsNotFound, message: "create container k8s_POD_x: ",
			call: func(c *SDKClient) error {
				return errOf(c.CreateContainer(ctx, ContainerSpec{Name: "k8s_POD_x", Image: "missing"}))
			}},
		{name: "start missing", status: http.StatusNotFound, kind: cerrdefs.IsNotFound, message: "start container gone: ",
			call: func(c *SDKClient) error { return c.StartContainer(ctx, "gone") }},
		{name: "stop missing", status: http.StatusNotFound, kind: cerrdefs.IsNotFound, message: "stop container gone: ",
			call: func(c *SDKClient) error { return c.StopContainer(ctx, "gone", time.Second) }},
		{name: "remove missing", status: http.StatusNotFound, kind: cerrdefs.IsNotFound, message: "remove container gone: ",
			call: func(c *SDKClient) error { return c.RemoveContainer(ctx, "gone") }},
		{name: "inspect missing", status: http.StatusNotFound, kind: cerrdefs.IsNotFound, message: "inspect container gone: ",
			call: func(c *SDKClient) error { return errOf(c.InspectContainer(ctx, "gone")) }},
		{name: "exec in a stopped container", status: http.StatusConflict, kind: cerrdefs.IsFailedPrecondition, message: "exec in container stopped: ",
			call: func(c *SDKClient) error { return errOf(c.Exec(ctx, "stopped", ExecOptions{Cmd: []string{"true"}})) }},
		{name: "stats of a missing container", status: http.StatusNotFound, kind: cerrdefs.IsNotFound, message: "container stats gone: ",
			call: func(c *SDKClient) error { return errOf(c.ContainerStats(ctx, "gone")) }},
		{name: "logs of a missing container", status: http.StatusNotFound, kind: cerrdefs.IsNotFound, message: "container logs gone: ",
			call: func(c *SDKClient) error { return c.ContainerLogs(ctx, "gone", LogsOptions{}) }},
		{name: "update missing", status: http.StatusNotFound, kind: cerrdefs.IsNotFound, message: "update container resources gone: ",
			call: func(c *SDKClient) error { return c.UpdateContainerResources(ctx, "gone", Resources{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(engineAnswering(t, tc.status, "engine says no"))
			assertKindError(t, err, tc.kind, tc.message, "engine says no")
		})
	}
}

// errOf is the error of a call that returns a value too.
func errOf[T any](_ T, err error) error { return err }

// assertKindError checks that err is of the kind kind, that its message starts with
// prefix (the operation) and that it contains message.
func assertKindError(t *testing.T, err error, kind func(error) bool, prefix, message string) {
	t.Helper()
	assert.Assert(t, err != nil)
	assert.Assert(t, kind(err), "%v", err)
	assert.Assert(t, strings.HasPrefix(err.Error(), prefix), err.Error())
	assert.Assert(t, is.Contains(err.Error(), message))
}

func TestCreateConflictKeepsEngineError(t *testing.T) {
	c := engineAnswering(t, http.StatusConflict, `Conflict. The container name \"/k8s_POD_x\" is already in use`)
	_, err := c.CreateContainer(context.Background(), ContainerSpec{Name: "k8s_POD_x", Image: "pause"})
	assert.Assert(t, cerrdefs.IsAlreadyExists(err))
	var ke *errkind.Error
	assert.Assert(t, errors.As(err, &ke))
	assert.Assert(t, cerrdefs.IsConflict(ke.Cause()), "the SDK's conflict error stays reachable")
}

func TestStopContainer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		status  int
		wantT   string
	}{
		{name: "zero", timeout: 0, status: http.StatusNoContent, wantT: "0"},
		{name: "negative", timeout: -time.Second, status: http.StatusNoContent, wantT: "0"},
		{name: "whole seconds", timeout: 2 * time.Second, status: http.StatusNoContent, wantT: "2"},
		{name: "rounded up", timeout: 1500 * time.Millisecond, status: http.StatusNoContent, wantT: "2"},
		{name: "a nanosecond", timeout: 1, status: http.StatusNoContent, wantT: "1"},
		{name: "already stopped", timeout: 10 * time.Second, status: http.StatusNotModified, wantT: "10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gotT string
			c := routedEngine(t, map[string]http.HandlerFunc{
				"POST /containers/abc/stop": func(w http.ResponseWriter, r *http.Request) {
					gotT = r.URL.Query().Get("t")
					w.WriteHeader(tc.status)
				},
			})
			assert.NilError(t, c.StopContainer(context.Background(), "abc", tc.timeout))
			assert.Equal(t, gotT, tc.wantT)
		})
	}
}

func TestRemoveContainerIsForcedWithVolumes(t *testing.T) {
	var query string
	c := routedEngine(t, map[string]http.HandlerFunc{
		"DELETE /containers/abc": func(w http.ResponseWriter, r *http.Request) {
			query = r.URL.RawQuery
			w.WriteHeader(http.StatusNoContent)
		},
	})
	assert.NilError(t, c.RemoveContainer(context.Background(), "abc"))
	assert.Assert(t, is.Contains(query, "force=1"))
	assert.Assert(t, is.Contains(query, "v=1"))
}

func TestListContainers(t *testing.T) {
	const body = `[
	 {"Id":"aaa","Names":["/k8s_POD_a","/alias"],"Image":"registry.k8s.io/pause:3.10","ImageID":"sha256:111",
	  "Created":1700000000,"Labels":{"io.kubernetes.pod.name":"a"},"State":"running","Status":"Up 1 minute"},
	 {"Id":"bbb","Names":[],"Image":"busybox","ImageID":"sha256:222","Created":1700000100,"State":"exited"}
	]`
	for _, tc := range []struct {
		name        string
		filter      ContainerFilter
		wantAll     bool
		wantFilters map[string]map[string]bool
	}{
		{name: "everything", wantAll: true, wantFilters: map[string]map[string]bool{}},
		{name: "running only", filter: ContainerFilter{Running: true}, wantFilters: map[string]map[string]bool{}},
		{
			name:    "by id and labels",
			filter:  ContainerFilter{ID: "aa", Labels: map[string]string{"io.kubernetes.pod.name": "a", "k": "v"}},
			wantAll: true,
			wantFilters: map[string]map[string]bool{
				"id":    {"aa": true},
				"label": {"io.kubernetes.pod.name=a": true, "k=v": true},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var all bool
			filtersArg := map[string]map[string]bool{}
			c := routedEngine(t, map[string]http.HandlerFunc{
				"GET /containers/json": func(w http.ResponseWriter, r *http.Request) {
					all = r.URL.Query().Get("all") == "1"
					if f := r.URL.Query().Get("filters"); f != "" {
						_ = json.Unmarshal([]byte(f), &filtersArg)
					}
					_, _ = w.Write([]byte(body))
				},
			})
			list, err := c.ListContainers(context.Background(), tc.filter)
			assert.NilError(t, err)
			assert.Equal(t, all, tc.wantAll)
			assert.DeepEqual(t, filtersArg, tc.wantFilters)
			assert.DeepEqual(t, list, []Container{
				{
					ID: "aaa", Name: "k8s_POD_a", Image: "registry.k8s.io/pause:3.10", ImageID: "sha256:111",
					Labels: map[string]string{"io.kubernetes.pod.name": "a"}, State: StateRunning,
					Created: time.Unix(1700000000, 0),
				},
				{ID: "bbb", Image: "busybox", ImageID: "sha256:222", State: StateExited, Created: time.Unix(1700000100, 0)},
			})
		})
	}
}

func TestListContainersWithSize(t *testing.T) {
	const body = `[{"Id":"aaa","Names":["/a"],"State":"running","SizeRw":12288}]`
	var size string
	c := routedEngine(t, map[string]http.HandlerFunc{
		"GET /containers/json": func(w http.ResponseWriter, r *http.Request) {
			size = r.URL.Query().Get("size")
			_, _ = w.Write([]byte(body))
		},
	})
	list, err := c.ListContainers(context.Background(), ContainerFilter{Running: true, Size: true})
	assert.NilError(t, err)
	assert.Equal(t, size, "1")
	assert.Equal(t, len(list), 1)
	assert.Equal(t, list[0].SizeRw, int64(12288))

	list, err = c.ListContainers(context.Background(), ContainerFilter{Running: true})
	assert.NilError(t, err)
	assert.Equal(t, size, "")
	assert.Equal(t, list[0].SizeRw, int64(0), "not asked for")
}

func TestInspectContainer(t *testing.T) {
	const body = `{
	 "Id":"abc","Created":"2024-05-01T10:00:00.123456789Z","Name":"/k8s_app_pod",
	 "Image":"sha256:img","ResolvConfPath":"/var/lib/docker/containers/abc/resolv.conf",
	 "HostnamePath":"/var/lib/docker/containers/abc/hostname","HostsPath":"/var/lib/docker/containers/abc/hosts",
	 "LogPath":"/var/lib/docker/containers/abc/abc-json.log",
	 "State":{"Status":"exited","Running":false,"OOMKilled":true,"Pid":0,"ExitCode":137,"Error":"oom",
	  "StartedAt":"2024-05-01T10:00:01.5Z","FinishedAt":"0001-01-01T00:00:00Z"},
	 "HostConfig":{"NetworkMode":"container:sandbox","PidMode":"host","IpcMode":"container:sandbox",
	  "CpuShares":256,"Memory":1048576,"PidsLimit":50,"Ulimits":[{"Name":"nofile","Soft":1,"Hard":2}]},
	 "Config":{"Hostname":"pod","User":"1000","Env":["A=1"],"Entrypoint":["/bin/sh"],"Cmd":["-c","true"],
	  "Image":"busybox:1.36","Labels":{"l":"v"},"Tty":false},
	 "Mounts":[{"Type":"bind","Source":"/host/a","Destination":"/a","Mode":"ro,Z","RW":false,"Propagation":"rslave"},
	           {"Type":"bind","Source":"/host/b","Destination":"/b","Mode":"","RW":true,"Propagation":"rprivate"}],
	 "NetworkSettings":{"Networks":{"zeta":{"IPAddress":"10.9.0.2"},"bridge":{"IPAddress":"172.17.0.5","GlobalIPv6Address":"fd00::5"}}}
	}`
	c := routedEngine(t, map[string]http.HandlerFunc{"GET /containers/abc/json": answer(http.StatusOK, body)})
	d, err := c.InspectContainer(context.Background(), "abc")
	assert.NilError(t, err)
	assert.DeepEqual(t, d, ContainerDetails{
		Container: Container{
			ID: "abc", Name: "k8s_app_pod", Image: "busybox:1.36", ImageID: "sha256:img",
			Labels: map[string]string{"l": "v"}, State: StateExited,
			Created: time.Date(2024, 5, 1, 10, 0, 0, 123456789, time.UTC),
		},
		ExitCode: 137, Error: "oom", OOMKilled: true,
		StartedAt: time.Date(2024, 5, 1, 10, 0, 1, 500000000, time.UTC),
		Hostname:  "pod", User: "1000", Env: []string{"A=1"}, Entrypoint: []string{"/bin/sh"}, Cmd: []string{"-c", "true"},
		NetworkMode: "container:sandbox", PidMode: "host", IpcMode: "container:sandbox",
		IPAddress: "172.17.0.5", IPv6Address: "fd00::5",
		ResolvConfPath: "/var/lib/docker/containers/abc/resolv.conf",
		HostnamePath:   "/var/lib/docker/containers/abc/hostname",
		HostsPath:      "/var/lib/docker/containers/abc/hosts",
		LogPath:        "/var/lib/docker/containers/abc/abc-json.log",
		Mounts: []Mount{
			{Source: "/host/a", Target: "/a", ReadOnly: true, Propagation: "rslave", SELinuxRelabel: true},
			{Source: "/host/b", Target: "/b", Propagation: "rprivate"},
		},
		Resources: Resources{CPUShares: 256, MemoryLimit: 1048576, PidsLimit: 50, Ulimits: []Ulimit{{Name: "nofile", Soft: 1, Hard: 2}}},
	})
	assert.Assert(t, d.FinishedAt.IsZero())
}

func TestInspectContainerAddresses(t *testing.T) {
	for _, tc := range []struct {
		name, networks, want string
	}{
		{name: "no network settings", networks: ``, want: ""},
		{name: "host network", networks: `"NetworkSettings":{"Networks":{"host":{"IPAddress":""}}},`, want: ""},
		{name: "first by name", networks: `"NetworkSettings":{"Networks":{"b":{"IPAddress":"10.0.0.2"},"a":{"IPAddress":"10.0.0.1"}}},`, want: "10.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := routedEngine(t, map[string]http.HandlerFunc{
				"GET /containers/abc/json": answer(http.StatusOK, `{`+tc.networks+`"Id":"abc","State":{"StartedAt":"","FinishedAt":""}}`),
			})
			d, err := c.InspectContainer(context.Background(), "abc")
			assert.NilError(t, err)
			assert.Equal(t, d.IPAddress, tc.want)
			assert.Assert(t, d.StartedAt.IsZero() && d.Created.IsZero())
		})
	}
}

func TestUpdateContainerResources(t *testing.T) {
	var got container.UpdateConfig
	c := routedEngine(t, map[string]http.HandlerFunc{
		"POST /containers/abc/update": func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewDecoder(r.Body).Decode(&got)
			_, _ = w.Write([]byte(`{"Warnings":[]}`))
		},
	})
	err := c.UpdateContainerResources(context.Background(), "abc", Resources{CPUQuota: 20000, CPUPeriod: 100000, MemoryLimit: 1 << 30, CpusetCpus: "1"})
	assert.NilError(t, err)
	assert.Equal(t, got.CPUQuota, int64(20000))
	assert.Equal(t, got.CPUPeriod, int64(100000))
	assert.Equal(t, got.Memory, int64(1<<30))
	assert.Equal(t, got.CpusetCpus, "1")
	assert.Assert(t, got.PidsLimit == nil, "an unset pids limit is left unchanged")
}

func TestContainerLogs(t *testing.T) {
	since := time.Unix(1700000000, 123)
	for _, tc := range []struct {
		name       string
		tty        bool
		opts       LogsOptions
		wantQuery  map[string]string
		wantStdout string
		wantStderr string
	}{
		{
			name:       "demultiplexed",
			opts:       LogsOptions{},
			wantQuery:  map[string]string{"stdout": "1", "stderr": "1", "timestamps": "1", "follow": "", "since": ""},
			wantStdout: "2024-05-01T10:00:00.000000001Z out\n",
			wantStderr: "2024-05-01T10:00:00.000000002Z err\n",
		},
		{
			name:       "follow since",
			opts:       LogsOptions{Follow: true, Since: since},
			wantQuery:  map[string]string{"follow": "1", "since": "1700000000.000000123"},
			wantStdout: "2024-05-01T10:00:00.000000001Z out\n",
			wantStderr: "2024-05-01T10:00:00.000000002Z err\n",
		},
		{
			name:       "tty is raw",
			tty:        true,
			wantStdout: "2024-05-01T10:00:00.000000001Z out\r\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var query map[string][]string
			c := routedEngine(t, map[string]http.HandlerFunc{
				"GET /containers/abc/json": func(w http.ResponseWriter, _ *http.Request) {
					_ = json.NewEncoder(w).Encode(map[string]any{"Id": "abc", "Config": map[string]any{"Tty": tc.tty}})
				},
				"GET /containers/abc/logs": func(w http.ResponseWriter, r *http.Request) {
					query = r.URL.Query()
					if tc.tty {
						_, _ = io.WriteString(w, "2024-05-01T10:00:00.000000001Z out\r\n")
						return
					}
					_, _ = io.WriteString(stdcopy.NewStdWriter(w, stdcopy.Stdout), "2024-05-01T10:00:00.000000001Z out\n")
					_, _ = io.WriteString(stdcopy.NewStdWriter(w, stdcopy.Stderr), "2024-05-01T10:00:00.000000002Z err\n")
				},
			})
			var stdout, stderr bytes.Buffer
			tc.opts.Stdout, tc.opts.Stderr = &stdout, &stderr
			assert.NilError(t, c.ContainerLogs(context.Background(), "abc", tc.opts))
			assert.Equal(t, stdout.String(), tc.wantStdout)
			assert.Equal(t, stderr.String(), tc.wantStderr)
			for k, v := range tc.wantQuery {
				got := ""
				if vs := query[k]; len(vs) > 0 {
					got = vs[0]
				}
				assert.Equal(t, got, v, "query %s", k)
			}
		})
	}
}

func TestContainerLogsContextEnds(t *testing.T) {
	c := routedEngine(t, map[string]http.HandlerFunc{
		"GET /containers/abc/json": answer(http.StatusOK, `{"Id":"abc","Config":{"Tty":false}}`),
		"GET /containers/abc/logs": func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(stdcopy.NewStdWriter(w, stdcopy.Stdout), "line\n")
			http.NewResponseController(w).Flush()
			<-r.Context().Done()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var stdout bytes.Buffer
	err := c.ContainerLogs(ctx, "abc", LogsOptions{Follow: true, Stdout: &stdout, Stderr: io.Discard})
	assert.Assert(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Equal(t, stdout.String(), "line\n")
}
