//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"gotest.tools/v3/assert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkListsE2E: a node with BENCH_LISTS_CONTAINERS (default 11,000) containers in
// one pod, each with the labels and annotations kubelet gives a container (created, not
// started: cheap to make), listed by ListContainers and by StreamContainers (KEP-5825):
// the time of each, the unary answer's size and code (ResourceExhausted once it passes
// gRPC's 16 MiB), the messages of the stream, and our peak RSS (VmHWM) after each.
// make bench-lists runs it on each store.
func BenchmarkListsE2E(b *testing.B) {
	n := envInt("BENCH_LISTS_CONTAINERS", 11000)
	pauseImage(b)
	s := startShim(b, "--pod-infra-container-image", pauseRef, "--cri-dockerd-root-directory", filepath.Join(b.TempDir(), "root"))
	pod := podConfig("lists")
	podID := runPod(b, s, pod)
	b.Cleanup(func() {
		// The pod's address, veth and pause container go; its 11,000 containers are left
		// to the wipe of the engine's stack at the suite's next start (about a minute):
		// RemovePodSandbox would remove them one by one, which the containerd store does
		// at about 6 a second, even eight at a time.
		_, err := s.rt.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: podID})
		assert.Check(b, err)
		docker(b, "rm", "-f", podID)
	})
	start := time.Now()
	createContainers(b, podID, pod, n)
	b.Logf("created %d containers in %s", n, time.Since(start).Round(time.Second))
	ctx := context.Background()
	pid := s.cmd.Process.Pid
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		resp, err := s.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
		b.ReportMetric(time.Since(t0).Seconds(), "unary-s")
		b.ReportMetric(float64(procStatusKiB(b, pid, "VmHWM:"))/1024, "rss-peak-after-unary-MiB")
		switch {
		case err == nil:
			b.ReportMetric(float64(proto.Size(resp))/(1<<20), "unary-MiB")
			b.Logf("ListContainers: %d containers, %d bytes", len(resp.Containers), proto.Size(resp))
		case status.Code(err) == codes.ResourceExhausted:
			b.Logf("ListContainers: %v", err)
		default:
			b.Fatalf("ListContainers: %v", err)
		}

		t0 = time.Now()
		stream, err := s.rt.StreamContainers(ctx, &runtimeapi.StreamContainersRequest{})
		assert.NilError(b, err)
		msgs, items := 0, 0
		for {
			m, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			assert.NilError(b, err)
			msgs++
			items += len(m.Containers)
		}
		b.ReportMetric(time.Since(t0).Seconds(), "stream-s")
		b.ReportMetric(float64(msgs), "stream-messages")
		b.ReportMetric(float64(procStatusKiB(b, pid, "VmHWM:"))/1024, "rss-peak-after-stream-MiB")
		assert.Check(b, items >= n, "streamed %d of %d containers", items, n)
	}
}

// benchContainerName is the engine name of the bench's container i of pod md.
func benchContainerName(md *runtimeapi.PodSandboxMetadata, i int) string {
	return fmt.Sprintf("k8s_app-%05d_%s_%s_%s_0", i, md.Name, md.Namespace, md.Uid)
}

// createContainers makes n containers in the pod through the engine's API, eight at a
// time, named and labelled as our binary and kubelet name and label them.
func createContainers(b *testing.B, podID string, pod *runtimeapi.PodSandboxConfig, n int) {
	md := pod.Metadata
	engineRequests(b, n, func(client *http.Client, i int) error {
		name := fmt.Sprintf("app-%05d", i)
		labels := map[string]string{
			"io.kubernetes.docker.type": "container", "io.kubernetes.sandbox.id": podID,
			"io.kubernetes.container.name": name, "io.kubernetes.pod.name": md.Name,
			"io.kubernetes.pod.namespace": md.Namespace, "io.kubernetes.pod.uid": md.Uid,
			"io.kubernetes.container.logpath":                             fmt.Sprintf("/var/log/pods/%s_%s_%s/%s/0.log", md.Namespace, md.Name, md.Uid, name),
			"annotation.io.kubernetes.container.hash":                     "4c8b5f1e",
			"annotation.io.kubernetes.container.restartCount":             "0",
			"annotation.io.kubernetes.container.terminationMessagePath":   "/dev/termination-log",
			"annotation.io.kubernetes.container.terminationMessagePolicy": "File",
			"annotation.io.kubernetes.pod.terminationGracePeriod":         "30",
			"annotation.io.kubernetes.container.ports":                    `[{"name":"http","containerPort":8080,"protocol":"TCP"},{"name":"metrics","containerPort":9090,"protocol":"TCP"}]`,
			"annotation.kubectl.kubernetes.io/default-container":          name,
		}
		body, _ := json.Marshal(map[string]any{"Image": pauseRef, "Labels": labels})
		resp, err := client.Post("http://docker/containers/create?name="+benchContainerName(md, i), "application/json", bytes.NewReader(body))
		return engineAnswer(resp, err, http.StatusCreated)
	})
}

// engineAnswer is nil when an engine request got the status want, else its error.
func engineAnswer(resp *http.Response, err error, want int) error {
	if err != nil {
		return err
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %s", resp.Request.Method, resp.Request.URL.Path, resp.Status, msg)
	}
	return nil
}

// engineRequests runs do(client, i) for i in [0, n) on eight workers, each with a
// client of the engine's socket; the first error fails b.
func engineRequests(b *testing.B, n int, do func(client *http.Client, i int) error) {
	sock := strings.TrimPrefix(env.dockerHost, "unix://")
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}, Timeout: 5 * time.Minute}
	work := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := do(client, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range n {
		select {
		case work <- i:
		case err := <-errs:
			close(work)
			wg.Wait()
			b.Fatal(err)
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}
