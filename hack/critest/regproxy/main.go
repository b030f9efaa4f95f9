// Command regproxy is the HTTP(S) proxy that hack/critest.sh gives its private Docker Engine, so
// that the public image names critest pulls (gcr.io/..., registry.k8s.io/...) are served by the
// local registry. Whatever host a request names, regproxy only ever dials the one registry
// address, so nothing leaves the machine:
//
//   - a proxied plain request (GET http://gcr.io/v2/...) goes to the registry with its Host kept,
//     so the upload locations the registry hands out name the public host and come back here;
//   - CONNECT host:443 is accepted and tunnelled to the registry's plain-HTTP port, where the
//     engine's TLS handshake gets an HTTP answer: that is the signal on which both image stores
//     (classic and containerd) fall back to http for an --insecure-registry. The registry itself
//     answers CONNECT with a redirect, which the containerd store does not fall back on.
//
// Usage: regproxy LISTEN-ADDR REGISTRY-ADDR   (both loopback host:port)
package main

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: regproxy LISTEN-ADDR REGISTRY-ADDR")
		os.Exit(2)
	}
	listen, registry := os.Args[1], os.Args[2]
	for _, addr := range []string{listen, registry} {
		if !loopback(addr) {
			log.Fatalf("regproxy: %q is not a loopback host:port", addr)
		}
	}
	forward := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.Out.URL.Scheme, pr.Out.URL.Host = "http", registry
		pr.Out.Host = pr.In.Host
	}}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			tunnel(w, registry)
			return
		}
		forward.ServeHTTP(w, r)
	})
	log.Printf("regproxy: listening on %s, every request goes to the registry at %s", listen, registry)
	log.Fatal(http.ListenAndServe(listen, handler))
}

// loopback reports whether addr is host:port with a loopback IP host.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}

// tunnel answers a CONNECT and splices the client's connection to the registry.
func tunnel(w http.ResponseWriter, registry string) {
	up, err := net.Dial("tcp", registry)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer up.Close()
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	go func() {
		_, _ = io.Copy(up, buf) // buf holds whatever the client sent after the CONNECT
		_ = up.(*net.TCPConn).CloseWrite()
	}()
	_, _ = io.Copy(conn, up)
}
