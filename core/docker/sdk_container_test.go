package docker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestContainerErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		status  int
		call    func(c *SDKClient) error
		kind    func(error) bool
		message string
	}{
		{
			name:   "create with a taken name",
			status: http.StatusConflict,
			call: func(c *SDKClient) error {
				_, err := c.CreateContainer(ctx, ContainerSpec{Name: "k8s_POD_x", Image: "pause"})
				return err
			},
			kind:    cerrdefs.IsAlreadyExists,
			message: "create container k8s_POD_x: ",
		},
		{
			name:   "create from a missing image",
			status: http.StatusNotFound,
			call: func(c *SDKClient) error {
				_, err := c.CreateContainer(ctx, ContainerSpec{Name: "k8s_POD_x", Image: "missing"})
				return err
			},
			kind:    cerrdefs.IsNotFound,
			message: "create container k8s_POD_x: ",
		},
		{
			name:    "start missing",
			status:  http.StatusNotFound,
			call:    func(c *SDKClient) error { return c.StartContainer(ctx, "gone") },
			kind:    cerrdefs.IsNotFound,
			message: "start container gone: ",
		},
		{
			name:    "stop missing",
			status:  http.StatusNotFound,
			call:    func(c *SDKClient) error { return c.StopContainer(ctx, "gone", time.Second) },
			kind:    cerrdefs.IsNotFound,
			message: "stop container gone: ",
		},
		{
			name:    "remove missing",
			status:  http.StatusNotFound,
			call:    func(c *SDKClient) error { return c.RemoveContainer(ctx, "gone") },
			kind:    cerrdefs.IsNotFound,
			message: "remove container gone: ",
		},
		{
			name:   "inspect missing",
			status: http.StatusNotFound,
			call: func(c *SDKClient) error {
				_, err := c.InspectContainer(ctx, "gone")
				return err
			},
			kind:    cerrdefs.IsNotFound,
			message: "inspect container gone: ",
		},
		{
			name:   "exec in a stopped container",
			status: http.StatusConflict,
			call: func(c *SDKClient) error {
				_, err := c.Exec(ctx, "stopped", ExecOptions{Cmd: []string{"true"}})
				return err
			},
			kind:    cerrdefs.IsFailedPrecondition,
			message: "exec in container stopped: ",
		},
		{
			name:   "stats of a missing container",
			status: http.StatusNotFound,
			call: func(c *SDKClient) error {
				_, err := c.ContainerStats(ctx, "gone")
				return err
			},
			kind:    cerrdefs.IsNotFound,
			message: "container stats gone: ",
		},
		{
			name:    "logs of a missing container",
			status:  http.StatusNotFound,
			call:    func(c *SDKClient) error { return c.ContainerLogs(ctx, "gone", LogsOptions{}) },
			kind:    cerrdefs.IsNotFound,
			message: "container logs gone: ",
		},
		{
			name:    "update missing",
			status:  http.StatusNotFound,
			call:    func(c *SDKClient) error { return c.UpdateContainerResources(ctx, "gone", Resources{}) },
			kind:    cerrdefs.IsNotFound,
			message: "update container resources gone: ",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(engineAnswering(t, tc.status, "engine says no"))
			assert.Assert(t, err != nil)
			assert.Assert(t, tc.kind(err), "%v", err)
			assert.Assert(t, strings.HasPrefix(err.Error(), tc.message), err.Error())
			assert.Assert(t, is.Contains(err.Error(), "engine says no"))
		})
	}
}

func TestCreateConflictKeepsEngineError(t *testing.T) {
	c := engineAnswering(t, http.StatusConflict, `Conflict. The container name \"/k8s_POD_x\" is already in use`)
	_, err := c.CreateContainer(context.Background(), ContainerSpec{Name: "k8s_POD_x", Image: "pause"})
	assert.Assert(t, cerrdefs.IsAlreadyExists(err))
	var ke *kindError
	assert.Assert(t, errors.As(err, &ke))
	assert.Assert(t, cerrdefs.IsConflict(ke.cause), "the SDK's conflict error stays reachable")
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

// execEngine is a fake engine that runs one exec "e1" in container "abc": the
// attach hijacks the connection like the engine (HTTP 101, Upgrade: tcp), reads
// stdin to its end when asked to, and then sends what output writes (or, with
// session, runs it with stdin as it comes); inspect reports running for running
// polls, then exitCode, with pid; resize records the sizes asked for.
type execEngine struct {
	tty      bool
	withIn   bool
	output   func(stdin []byte, stdout, stderr io.Writer)
	session  func(stdin io.Reader, stdout, stderr io.Writer)
	hold     bool // keep the stream open until the client closes it
	running  int
	exitCode int
	pid      int
	resizes  resizeLog

	mu      sync.Mutex
	created container.ExecOptions
	inspect int
	done    chan struct{} // closed when the attach handler returned
}

func (e *execEngine) client(t *testing.T) *SDKClient {
	e.done = make(chan struct{})
	return routedEngine(t, map[string]http.HandlerFunc{
		"POST /containers/abc/exec": func(w http.ResponseWriter, r *http.Request) {
			e.mu.Lock()
			_ = json.NewDecoder(r.Body).Decode(&e.created)
			e.mu.Unlock()
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"Id":"e1"}`))
		},
		"POST /exec/e1/start": e.attach,
		"GET /exec/e1/json": func(w http.ResponseWriter, _ *http.Request) {
			e.mu.Lock()
			e.inspect++
			running := e.inspect <= e.running
			e.mu.Unlock()
			_ = json.NewEncoder(w).Encode(container.ExecInspect{ExecID: "e1", ContainerID: "abc", Running: running, ExitCode: e.exitCode, Pid: e.pid})
		},
		"POST /exec/e1/resize": e.resizes.record,
	})
}

func (e *execEngine) attach(w http.ResponseWriter, r *http.Request) {
	defer close(e.done)
	conn, stdin, stdout, stderr, ok := hijack(w, r, e.tty)
	if !ok {
		return
	}
	defer conn.Close()
	switch {
	case e.session != nil:
		e.session(stdin, stdout, stderr)
	case e.output != nil:
		var in []byte
		if e.withIn {
			in, _ = io.ReadAll(stdin)
		}
		e.output(in, stdout, stderr)
	case e.withIn:
		_, _ = io.Copy(io.Discard, stdin)
	}
	if e.hold {
		_, _ = io.Copy(io.Discard, stdin) // until the client closes the connection
	}
}

// hijack answers r as the engine answers an attach: HTTP 101 (Upgrade: tcp) with
// the stream's media type, then the bare connection. stdin reads what the client
// sends (EOF at its close-write); stdout and stderr write to the connection,
// multiplexed unless tty. The caller closes conn.
func hijack(w http.ResponseWriter, r *http.Request, tty bool) (conn net.Conn, stdin io.Reader, stdout, stderr io.Writer, ok bool) {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.Header.Get("Upgrade") != "tcp" {
		http.Error(w, "not an upgrade", http.StatusBadRequest)
		return nil, nil, nil, nil, false
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, nil, nil, nil, false
	}
	media := "application/vnd.docker.multiplexed-stream"
	if tty {
		media = "application/vnd.docker.raw-stream"
	}
	_, _ = rw.WriteString("HTTP/1.1 101 UPGRADED\r\nContent-Type: " + media + "\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
	_ = rw.Flush()
	stdout, stderr = conn, conn
	if !tty {
		stdout, stderr = stdcopy.NewStdWriter(conn, stdcopy.Stdout), stdcopy.NewStdWriter(conn, stdcopy.Stderr)
	}
	return conn, rw, stdout, stderr, true
}

// resizeLog is an engine's resize endpoint: it records the sizes asked for (query
// h and w), after answering the first conflicts requests 409 as an engine does
// for a process that is not running yet.
type resizeLog struct {
	conflicts int

	mu       sync.Mutex
	requests int
	sizes    []TerminalSize
}

func (l *resizeLog) record(w http.ResponseWriter, r *http.Request) {
	h, errH := strconv.ParseUint(r.URL.Query().Get("h"), 10, 16)
	wd, errW := strconv.ParseUint(r.URL.Query().Get("w"), 10, 16)
	if errH != nil || errW != nil {
		http.Error(w, `{"message":"bad size"}`, http.StatusBadRequest)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests++
	if l.requests <= l.conflicts {
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"message":"container abc is not running"}`))
		return
	}
	l.sizes = append(l.sizes, TerminalSize{Width: uint16(wd), Height: uint16(h)})
	w.WriteHeader(http.StatusOK)
}

// wait waits until n sizes were recorded (or a while has passed) and returns them
// with the number of requests.
func (l *resizeLog) wait(n int) ([]TerminalSize, int) {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		l.mu.Lock()
		sizes, requests := slices.Clone(l.sizes), l.requests
		l.mu.Unlock()
		if len(sizes) >= n || time.Now().After(deadline) {
			return sizes, requests
		}
	}
}

// sendSizes sends sizes on a new unbuffered channel, each after the previous one
// reached the engine (so none replaces another), and returns the channel.
func sendSizes(l *resizeLog, sizes ...TerminalSize) chan TerminalSize {
	ch := make(chan TerminalSize)
	go func() {
		for i, s := range sizes {
			ch <- s
			l.wait(i + 1)
		}
	}()
	return ch
}

// assertNotRead checks that nobody reads sizes any more.
func assertNotRead(t *testing.T, sizes chan<- TerminalSize) {
	t.Helper()
	select {
	case sizes <- TerminalSize{Width: 1, Height: 1}:
		t.Fatal("a size was read after the call returned")
	case <-time.After(50 * time.Millisecond):
	}
}

func TestExec(t *testing.T) {
	for _, tc := range []struct {
		name       string
		engine     *execEngine
		stdin      string
		wantOut    string
		wantErr    string
		wantCode   int
		wantInStd  bool
		wantInspct int
	}{
		{
			name: "demultiplexed output and exit code",
			engine: &execEngine{exitCode: 3, output: func(_ []byte, stdout, stderr io.Writer) {
				_, _ = io.WriteString(stdout, "out 1\n")
				_, _ = io.WriteString(stderr, "err 1\n")
				_, _ = io.WriteString(stdout, "out 2\n")
			}},
			wantOut: "out 1\nout 2\n", wantErr: "err 1\n", wantCode: 3, wantInspct: 1,
		},
		{
			name: "stdin copied and closed",
			engine: &execEngine{withIn: true, output: func(stdin []byte, stdout, _ io.Writer) {
				_, _ = stdout.Write(bytes.ToUpper(stdin))
			}},
			stdin: "hello\n", wantOut: "HELLO\n", wantInStd: true, wantInspct: 1,
		},
		{
			name: "tty output is raw",
			engine: &execEngine{tty: true, output: func(_ []byte, stdout, _ io.Writer) {
				_, _ = io.WriteString(stdout, "\x01\x00\x00\x00raw\r\n")
			}},
			wantOut: "\x01\x00\x00\x00raw\r\n", wantInspct: 1,
		},
		{
			name:     "exit code waits for the process to be reported exited",
			engine:   &execEngine{running: 2, exitCode: 7},
			wantCode: 7, wantInspct: 3,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.engine
			c := e.client(t)
			var stdout, stderr bytes.Buffer
			opts := ExecOptions{Cmd: []string{"sh", "-c", "x"}, Tty: e.tty, Stdout: &stdout, Stderr: &stderr}
			if tc.stdin != "" {
				opts.Stdin = strings.NewReader(tc.stdin)
			}
			code, err := c.Exec(context.Background(), "abc", opts)
			assert.NilError(t, err)
			assert.Equal(t, code, tc.wantCode)
			assert.Equal(t, stdout.String(), tc.wantOut)
			assert.Equal(t, stderr.String(), tc.wantErr)
			<-e.done
			e.mu.Lock()
			defer e.mu.Unlock()
			assert.DeepEqual(t, e.created.Cmd, opts.Cmd)
			assert.Equal(t, e.created.Tty, e.tty)
			assert.Assert(t, e.created.AttachStdout && e.created.AttachStderr)
			assert.Equal(t, e.created.AttachStdin, tc.wantInStd)
			assert.Equal(t, e.inspect, tc.wantInspct)
		})
	}
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

func TestExecResize(t *testing.T) {
	e := &execEngine{tty: true}
	e.session = func(_ io.Reader, stdout, _ io.Writer) {
		got, _ := e.resizes.wait(2)
		_, _ = fmt.Fprintf(stdout, "%d sizes\r\n", len(got))
	}
	c := e.client(t)
	sizes := sendSizes(&e.resizes, TerminalSize{Width: 80, Height: 24}, TerminalSize{Width: 120, Height: 40})
	var stdout bytes.Buffer
	code, err := c.Exec(context.Background(), "abc", ExecOptions{Cmd: []string{"sh"}, Tty: true, Stdout: &stdout, Resize: sizes})
	assert.NilError(t, err)
	assert.Equal(t, code, 0)
	assert.Equal(t, stdout.String(), "2 sizes\r\n")
	got, _ := e.resizes.wait(2)
	assert.DeepEqual(t, got, []TerminalSize{{Width: 80, Height: 24}, {Width: 120, Height: 40}})
	assertNotRead(t, sizes)
}

func TestExecWithoutTTYIgnoresResize(t *testing.T) {
	e := &execEngine{}
	c := e.client(t)
	sizes := make(chan TerminalSize)
	_, err := c.Exec(context.Background(), "abc", ExecOptions{Cmd: []string{"true"}, Resize: sizes})
	assert.NilError(t, err)
	assertNotRead(t, sizes)
	_, requests := e.resizes.wait(0)
	assert.Equal(t, requests, 0)
}

// shell is an engine session that answers each line of stdin as it comes, until
// "exit" or the end of stdin.
func shell(stdin io.Reader, stdout, _ io.Writer) {
	lines := bufio.NewScanner(stdin)
	for lines.Scan() {
		if lines.Text() == "exit" {
			return
		}
		_, _ = io.WriteString(stdout, "> "+lines.Text()+"\r\n")
	}
}

// converse drives shell through run: a command's answer must come while stdin is
// still open, and "exit" must end run with nil.
func converse(t *testing.T, run func(stdin io.Reader, stdout io.Writer) error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	defer inW.Close()
	done := make(chan error, 1)
	go func() {
		err := run(inR, outW)
		_ = outW.Close()
		done <- err
	}()
	out := bufio.NewReader(outR)
	for _, cmd := range []string{"ls", "pwd"} {
		_, err := io.WriteString(inW, cmd+"\n")
		assert.NilError(t, err)
		line, err := out.ReadString('\n')
		assert.NilError(t, err)
		assert.Equal(t, line, "> "+cmd+"\r\n")
	}
	_, err := io.WriteString(inW, "exit\n")
	assert.NilError(t, err)
	_, _ = io.Copy(io.Discard, out)
	assert.NilError(t, <-done)
}

func TestExecInteractive(t *testing.T) {
	e := &execEngine{tty: true, session: shell}
	c := e.client(t)
	converse(t, func(stdin io.Reader, stdout io.Writer) error {
		_, err := c.Exec(context.Background(), "abc", ExecOptions{Cmd: []string{"sh"}, Tty: true, Stdin: stdin, Stdout: stdout})
		return err
	})
	e.mu.Lock()
	defer e.mu.Unlock()
	assert.Assert(t, e.created.AttachStdin && e.created.Tty)
}

// attachEngine is a fake engine with one container "abc" (with a TTY when tty):
// inspect reports the states in turn, the last one from then on ("gone" answers
// 404); attach answers refuse, if set, or hijacks the connection like the engine
// and runs session with the client's stdin and the container's output streams;
// resize records the sizes asked for.
type attachEngine struct {
	states  []string
	tty     bool
	refuse  int
	session func(stdin io.Reader, stdout, stderr io.Writer)
	resizes resizeLog

	mu       sync.Mutex
	inspects int
	query    url.Values
	done     chan struct{} // closed when the attach handler returned
}

func (e *attachEngine) client(t *testing.T) *SDKClient {
	e.done = make(chan struct{})
	return routedEngine(t, map[string]http.HandlerFunc{
		"GET /containers/abc/json": func(w http.ResponseWriter, _ *http.Request) {
			e.mu.Lock()
			state := "running"
			if len(e.states) > 0 {
				state = e.states[min(e.inspects, len(e.states)-1)]
			}
			e.inspects++
			e.mu.Unlock()
			if state == "gone" {
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"message":"No such container: abc"}`))
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{
				"Id": "abc",
				"State": map[string]any{
					"Status":     state,
					"Running":    state == "running" || state == "paused" || state == "restarting",
					"Paused":     state == "paused",
					"Restarting": state == "restarting",
				},
				"Config": map[string]any{"Tty": e.tty},
			})
		},
		"POST /containers/abc/attach": func(w http.ResponseWriter, r *http.Request) {
			defer close(e.done)
			e.mu.Lock()
			e.query = r.URL.Query()
			e.mu.Unlock()
			if e.refuse != 0 {
				w.WriteHeader(e.refuse)
				_, _ = w.Write([]byte(`{"message":"engine says no"}`))
				return
			}
			conn, stdin, stdout, stderr, ok := hijack(w, r, e.tty)
			if !ok {
				return
			}
			defer conn.Close()
			if e.session != nil {
				e.session(stdin, stdout, stderr)
			}
		},
		"POST /containers/abc/resize": e.resizes.record,
	})
}

func TestAttach(t *testing.T) {
	for _, tc := range []struct {
		name      string
		engine    *attachEngine
		stdin     string
		noStderr  bool
		wantOut   string
		wantErr   string
		wantQuery map[string]string
	}{
		{
			name: "demultiplexed output",
			engine: &attachEngine{session: func(_ io.Reader, stdout, stderr io.Writer) {
				_, _ = io.WriteString(stdout, "out 1\n")
				_, _ = io.WriteString(stderr, "err 1\n")
				_, _ = io.WriteString(stdout, "out 2\n")
			}},
			wantOut: "out 1\nout 2\n", wantErr: "err 1\n",
			wantQuery: map[string]string{"stream": "1", "stdin": "", "stdout": "1", "stderr": "1", "logs": ""},
		},
		{
			name: "tty output is raw",
			engine: &attachEngine{tty: true, session: func(_ io.Reader, stdout, _ io.Writer) {
				_, _ = io.WriteString(stdout, "\x01\x00\x00\x00raw\r\n")
			}},
			wantOut:   "\x01\x00\x00\x00raw\r\n",
			wantQuery: map[string]string{"stream": "1", "stdout": "1", "stderr": "1"},
		},
		{
			name: "stdin forwarded and closed",
			engine: &attachEngine{session: func(stdin io.Reader, stdout, _ io.Writer) {
				in, _ := io.ReadAll(stdin) // to the client's close-write
				_, _ = stdout.Write(bytes.ToUpper(in))
			}},
			stdin: "hello\n", noStderr: true,
			wantOut:   "HELLO\n",
			wantQuery: map[string]string{"stream": "1", "stdin": "1", "stdout": "1", "stderr": ""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.engine
			c := e.client(t)
			var stdout, stderr bytes.Buffer
			opts := AttachOptions{Tty: e.tty, Stdout: &stdout}
			if !tc.noStderr {
				opts.Stderr = &stderr
			}
			if tc.stdin != "" {
				opts.Stdin = strings.NewReader(tc.stdin)
			}
			assert.NilError(t, c.Attach(context.Background(), "abc", opts))
			assert.Equal(t, stdout.String(), tc.wantOut)
			assert.Equal(t, stderr.String(), tc.wantErr)
			<-e.done
			e.mu.Lock()
			defer e.mu.Unlock()
			for k, v := range tc.wantQuery {
				assert.Equal(t, e.query.Get(k), v, "query %s", k)
			}
		})
	}
}

func TestAttachInteractive(t *testing.T) {
	e := &attachEngine{tty: true, session: shell}
	c := e.client(t)
	converse(t, func(stdin io.Reader, stdout io.Writer) error {
		return c.Attach(context.Background(), "abc", AttachOptions{Tty: true, Stdin: stdin, Stdout: stdout})
	})
}

func TestAttachResize(t *testing.T) {
	e := &attachEngine{tty: true, resizes: resizeLog{conflicts: 2}}
	e.session = func(_ io.Reader, stdout, _ io.Writer) {
		got, _ := e.resizes.wait(2)
		_, _ = fmt.Fprintf(stdout, "%d sizes\r\n", len(got))
	}
	c := e.client(t)
	sizes := sendSizes(&e.resizes, TerminalSize{Width: 80, Height: 24}, TerminalSize{Width: 120, Height: 40})
	var stdout bytes.Buffer
	assert.NilError(t, c.Attach(context.Background(), "abc", AttachOptions{Tty: true, Stdout: &stdout, Resize: sizes}))
	assert.Equal(t, stdout.String(), "2 sizes\r\n")
	got, requests := e.resizes.wait(2)
	// The first size was refused twice (the process not running yet), then applied.
	assert.DeepEqual(t, got, []TerminalSize{{Width: 80, Height: 24}, {Width: 120, Height: 40}})
	assert.Equal(t, requests, 4)
	assertNotRead(t, sizes)
}

func TestAttachErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		engine  *attachEngine
		kind    func(error) bool
		message string
	}{
		{
			name:    "missing container",
			engine:  &attachEngine{states: []string{"gone"}},
			kind:    cerrdefs.IsNotFound,
			message: "No such container: abc",
		},
		{
			name:    "stopped container",
			engine:  &attachEngine{states: []string{"exited"}},
			kind:    cerrdefs.IsFailedPrecondition,
			message: "container is not running (exited)",
		},
		{
			name:    "paused container",
			engine:  &attachEngine{states: []string{"paused"}},
			kind:    cerrdefs.IsFailedPrecondition,
			message: "container is paused",
		},
		{
			name:    "stopped before the attach: the engine answers 409",
			engine:  &attachEngine{states: []string{"running", "exited"}, refuse: http.StatusConflict},
			kind:    cerrdefs.IsFailedPrecondition,
			message: "409",
		},
		{
			name:    "removed before the attach",
			engine:  &attachEngine{states: []string{"running", "gone"}, refuse: http.StatusNotFound},
			kind:    cerrdefs.IsNotFound,
			message: "404",
		},
		{
			name:    "attach refused for another reason",
			engine:  &attachEngine{refuse: http.StatusInternalServerError},
			kind:    cerrdefs.IsUnknown,
			message: "500",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.engine.client(t)
			err := c.Attach(context.Background(), "abc", AttachOptions{Stdout: io.Discard})
			assert.Assert(t, err != nil)
			assert.Assert(t, tc.kind(err), "%v", err)
			assert.Assert(t, strings.HasPrefix(err.Error(), "attach to container abc: "), err.Error())
			assert.Assert(t, is.Contains(err.Error(), tc.message))
		})
	}
}

func TestAttachContextEnds(t *testing.T) {
	e := &attachEngine{tty: true, session: func(stdin io.Reader, stdout, _ io.Writer) {
		_, _ = io.WriteString(stdout, "started\r\n")
		_, _ = io.Copy(io.Discard, stdin) // until the client closes the connection
	}}
	c := e.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	sizes := make(chan TerminalSize) // never closed
	// stdin never ends: its copy stays blocked in Read after Attach returned.
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	var stdout syncBuffer
	err := c.Attach(ctx, "abc", AttachOptions{Tty: true, Stdin: stdinR, Stdout: &stdout, Resize: sizes})
	assert.Assert(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Assert(t, strings.HasPrefix(err.Error(), "attach to container abc: "), err.Error())
	assert.Equal(t, stdout.String(), "started\r\n")
	select {
	case <-e.done: // Attach closed the hijacked connection
	case <-time.After(10 * time.Second):
		t.Fatal("the hijacked connection stayed open")
	}
	assertNotRead(t, sizes)
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestApplyResizes(t *testing.T) {
	conflict := fmt.Errorf("not running yet: %w", cerrdefs.ErrConflict)
	for _, tc := range []struct {
		name      string
		fail      []error // the answers to the first calls
		wantCalls int
	}{
		{name: "applied", wantCalls: 1},
		{name: "conflicts are tried again", fail: []error{conflict, conflict}, wantCalls: 3},
		{name: "other errors are dropped", fail: []error{errors.New("no tty")}, wantCalls: 1},
		{name: "conflicts are tried a few times only", fail: slices.Repeat([]error{conflict}, resizeAttempts+5), wantCalls: resizeAttempts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var calls []container.ResizeOptions
			sizes := make(chan TerminalSize)
			stop := applyResizes(context.Background(), sizes, func(_ context.Context, size container.ResizeOptions) error {
				mu.Lock()
				defer mu.Unlock()
				calls = append(calls, size)
				if n := len(calls); n <= len(tc.fail) {
					return tc.fail[n-1]
				}
				return nil
			})
			sizes <- TerminalSize{Width: 80, Height: 24}
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				mu.Lock()
				n := len(calls)
				mu.Unlock()
				if n >= tc.wantCalls {
					break
				}
			}
			time.Sleep(3 * resizeRetryInterval) // room for a retry too many
			stop()
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, len(calls), tc.wantCalls)
			for _, c := range calls {
				assert.Equal(t, c, container.ResizeOptions{Width: 80, Height: 24})
			}
		})
	}
}

func TestApplyResizesStopsWhileSizesOpen(t *testing.T) {
	sizes := make(chan TerminalSize)
	stop := applyResizes(context.Background(), sizes, func(context.Context, container.ResizeOptions) error { return nil })
	sizes <- TerminalSize{Width: 1, Height: 1}
	stop()
	assertNotRead(t, sizes)
}
