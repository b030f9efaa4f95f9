package docker

import (
	"net/http"
	"strings"

	"github.com/dockpin/cri-dockerd/internal/logctx"
)

// timedTransport times every engine call as a phase of the request its context
// belongs to (logctx.Time), named by enginePhase: the request's debug line then
// shows which engine calls it made and how long the engine took for each. It times
// up to the response's header, which is when the engine has done the work.
type timedTransport struct {
	next http.RoundTripper
}

func (t timedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	defer logctx.Time(req.Context(), enginePhase(req.Method, req.URL.Path))()
	return t.next.RoundTrip(req)
}

// enginePhase names an engine API call without its version and object names:
// "engine.containers.create", "engine.containers.inspect", "engine.containers.start",
// "engine.containers.delete", "engine.containers.list", "engine.images.inspect",
// "engine.info".
func enginePhase(method, path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if len(segs) > 1 && strings.HasPrefix(segs[0], "v1.") {
		segs = segs[1:]
	}
	name := "engine." + segs[0]
	last := segs[len(segs)-1]
	switch {
	case method == http.MethodDelete:
		return name + ".delete"
	case len(segs) == 1:
		return name
	case len(segs) == 2 && last == "json":
		return name + ".list"
	case last == "json":
		return name + ".inspect"
	}
	return name + "." + last
}
