package docker

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

// testEngine is a client for an HTTP engine on loopback that speaks apiVersion,
// answers /_ping, and passes every other request to handle.
func testEngine(t *testing.T, apiVersion string, handle http.HandlerFunc) *SDKClient {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", apiVersion)
		if strings.HasSuffix(r.URL.Path, "/_ping") {
			_, _ = w.Write([]byte("OK"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		handle(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := NewSDKClient("tcp://" + strings.TrimPrefix(srv.URL, "http://"))
	assert.NilError(t, err)
	return c
}

// versionedEngine answers /version as an engine speaking apiVersion would.
func versionedEngine(t *testing.T, apiVersion string) *SDKClient {
	return testEngine(t, apiVersion, func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/version") {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"Version":"20.10.24","ApiVersion":"` + apiVersion + `","MinAPIVersion":"1.12"}`))
	})
}

// engineAnswering answers every request with status and message.
func engineAnswering(t *testing.T, status int, message string) *SDKClient {
	return testEngine(t, "1.51", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"message":"` + message + `"}`))
	})
}

// engineStreaming answers every request with body (a JSON stream).
func engineStreaming(t *testing.T, body string) *SDKClient {
	return testEngine(t, "1.51", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(body))
	})
}

// engineStalling sends nothing for stall (or until the client goes away).
func engineStalling(t *testing.T, stall time.Duration) *SDKClient {
	return testEngine(t, "1.51", func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(stall):
		case <-r.Context().Done():
		}
	})
}

// routedEngine is a fake engine that dispatches "METHOD /path" (without the API
// version prefix) to routes; anything else is 404 page not found.
func routedEngine(t *testing.T, routes map[string]http.HandlerFunc) *SDKClient {
	t.Helper()
	return testEngine(t, "1.51", func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if strings.HasPrefix(p, "/v1.") {
			if i := strings.Index(p[1:], "/"); i >= 0 {
				p = p[i+1:]
			}
		}
		h, ok := routes[r.Method+" "+p]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"page not found: ` + r.Method + " " + p + `"}`))
			return
		}
		h(w, r)
	})
}

func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// Requests that run at once keep their connections for the next ones: none is dialled
// again after the first burst (Go's default keeps 2 idle connections per host).
func TestConcurrentRequestsReuseConnections(t *testing.T) {
	const parallel, rounds = 4, 5
	var (
		mu      sync.Mutex
		conns   int
		arrived int
		release = make(chan struct{})
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.51")
		if strings.HasSuffix(r.URL.Path, "/_ping") {
			_, _ = w.Write([]byte("OK"))
			return
		}
		// Every request of a round waits for the others: they hold their connections at once.
		mu.Lock()
		arrived++
		ch := release
		if arrived == parallel {
			arrived = 0
			close(release)
			release = make(chan struct{})
		}
		mu.Unlock()
		<-ch
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := NewSDKClient("tcp://" + strings.TrimPrefix(srv.URL, "http://"))
	assert.NilError(t, err)
	_, err = c.api.Ping(context.Background()) // the version negotiation, on a connection of its own
	assert.NilError(t, err)
	for range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, parallel)
		for i := range parallel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- c.RemoveContainer(context.Background(), fmt.Sprint("c", i))
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			assert.NilError(t, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Check(t, conns <= parallel, "%d connections for %d rounds of %d requests at once", conns, rounds, parallel)
}
