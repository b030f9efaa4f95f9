// Command citool gives the offline substitutes for critest's public test images
// (built by hack/critest/images.sh) their behaviour. It is a multi-call binary:
// the personality is the base name it runs as, or its first argument when it
// runs as "citool".
//
//	pause        wait for SIGTERM/SIGINT, reaping children meanwhile (a pod's infra container)
//	nginx        answer HTTP 200 on $PORT (default 80); writes /var/run/nginx.pid first
//	httpd        answer HTTP 200 on $PORT (default 80); logs a line naming "httpd"
//	nonewprivs   print "Effective uid: N" (installed setuid root, so N shows whether
//	             no_new_privs stopped the escalation)
//	ipcs         "ipcs -m": list System V shared memory ids (Debian's busybox has no ipcs)
//	pgrep        print the pids whose command name matches a regexp; exit 1 if none
//	counter      print "line N" (N = 1, 2, ...) every $INTERVAL (default 50ms) until SIGTERM
//	             (the e2e chaos test checks no log line is lost or written twice)
//	fill         "fill PATH BYTES": write a file of BYTES zero bytes (filling a writable layer)
//	nmeter       "nmeter [-d MS] FORMAT": busybox's nmeter for its %[N]t field only (the time,
//	             HH:MM:SS with N digits of the second's fraction), a line every MS (default
//	             1000) until stdout closes; the node conformance suite times its containers'
//	             starts with `nmeter -d0 '%3t' | head -n1` (Debian's busybox has no nmeter)
//
// Only the standard library is used; it is built with CGO_ENABLED=0 and runs in
// an image that holds nothing else but busybox.
package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if name == "citool" && len(args) > 0 {
		name, args = args[0], args[1:]
	}
	var err error
	switch name {
	case "pause":
		pause()
	case "nginx":
		err = os.WriteFile("/var/run/nginx.pid", []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
		if err == nil {
			err = serve("nginx")
		}
	case "httpd":
		err = serve("httpd")
	case "nonewprivs":
		fmt.Printf("Effective uid: %d\n", os.Geteuid())
	case "ipcs":
		err = ipcs()
	case "counter":
		err = counter()
	case "pgrep":
		if len(args) == 0 {
			err = fmt.Errorf("usage: pgrep PATTERN")
		} else if !pgrep(args[len(args)-1]) {
			os.Exit(1)
		}
	case "fill":
		err = fill(args)
	case "nmeter":
		err = nmeter(args)
	default:
		err = fmt.Errorf("unknown personality %q (want pause, nginx, httpd, nonewprivs, ipcs, pgrep, counter, fill or nmeter)", name)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
}

// fill writes args[1] zero bytes into file args[0], each block written (not sparse).
// nmeterLine expands FORMAT's %[N]t fields (the time of t, with N digits of fraction) and %%.
func nmeterLine(format string, t time.Time) (string, error) {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			b.WriteByte(format[i])
			continue
		}
		j := i + 1
		for j < len(format) && format[j] >= '0' && format[j] <= '9' {
			j++
		}
		if j == len(format) {
			return "", fmt.Errorf("format %q ends inside a field", format)
		}
		switch format[j] {
		case '%':
			b.WriteByte('%')
		case 't':
			digits := 0
			if j > i+1 {
				digits, _ = strconv.Atoi(format[i+1 : j])
			}
			b.WriteString(t.Format("15:04:05"))
			if digits > 0 {
				b.WriteString("." + fmt.Sprintf("%09d", t.Nanosecond())[:min(digits, 9)])
			}
		default:
			return "", fmt.Errorf("field %%%c is not supported (only %%[N]t)", format[j])
		}
		i = j
	}
	return b.String(), nil
}

func nmeter(args []string) error {
	delay := time.Second
	if len(args) > 0 && strings.HasPrefix(args[0], "-d") {
		v := strings.TrimPrefix(args[0], "-d")
		args = args[1:]
		if v == "" && len(args) > 0 {
			v, args = args[0], args[1:]
		}
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 {
			return fmt.Errorf("bad delay %q", v)
		}
		delay = time.Duration(ms) * time.Millisecond
	}
	if len(args) != 1 {
		return fmt.Errorf("usage: nmeter [-d MS] FORMAT")
	}
	for {
		line, err := nmeterLine(args[0], time.Now())
		if err != nil {
			return err
		}
		if _, err := fmt.Println(line); err != nil {
			return nil // the reader went away (head -n1): done
		}
		time.Sleep(delay)
	}
}

func fill(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: fill PATH BYTES")
	}
	n, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("bad size %q", args[1])
	}
	f, err := os.Create(args[0])
	if err != nil {
		return err
	}
	block := make([]byte, 64<<10)
	for ; n > 0; n -= int64(len(block)) {
		if _, err := f.Write(block[:min(n, int64(len(block)))]); err != nil {
			_ = f.Close()
			return err
		}
	}
	return f.Close()
}

// pause blocks until SIGTERM or SIGINT, reaping every child that exits meanwhile.
func pause() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

// serve answers every request with 200 and a one-line page until SIGTERM or SIGINT.
func serve(name string) error {
	port := os.Getenv("PORT")
	if port == "" {
		port = "80"
	}
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		<-sigs
		os.Exit(0)
	}()
	fmt.Printf("%s (citool) listening on :%s\n", name, port)
	return http.ListenAndServe(":"+port, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "<html><body>%s (citool substitute)</body></html>\n", name)
	}))
}

// ipcs prints the shared memory segments listed in /proc/sysvipc/shm in the layout of util-linux
// "ipcs -m" (key, shmid, owner uid, perms, bytes, nattch).
func ipcs() error {
	f, err := os.Open("/proc/sysvipc/shm")
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Printf("\n------ Shared Memory Segments --------\n%-10s %-10s %-10s %-10s %-10s %-10s\n",
		"key", "shmid", "owner", "perms", "bytes", "nattch")
	lines := bufio.NewScanner(f)
	lines.Scan() // header
	for lines.Scan() {
		// key shmid perms size cpid lpid nattch uid gid ...
		fields := strings.Fields(lines.Text())
		if len(fields) < 8 {
			continue
		}
		key, _ := strconv.ParseInt(fields[0], 10, 64)
		fmt.Printf("0x%08x %-10s %-10s %-10s %-10s %-10s\n", uint32(key), fields[1], fields[7], fields[2], fields[3], fields[6])
	}
	return lines.Err()
}

// pgrep prints the pid of every other process whose command name matches pattern and reports
// whether there was one.
func pgrep(pattern string) bool {
	re, err := regexp.Compile(pattern)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgrep: %v\n", err)
		os.Exit(2)
	}
	entries, _ := os.ReadDir("/proc")
	found := false
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && re.MatchString(strings.TrimSpace(string(comm))) {
			fmt.Println(pid)
			found = true
		}
	}
	return found
}

// counter prints numbered lines every $INTERVAL until SIGTERM or SIGINT.
func counter() error {
	interval := 50 * time.Millisecond
	if v := os.Getenv("INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return err
		}
		interval = d
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 1; ; n++ {
		fmt.Printf("line %d\n", n)
		select {
		case <-sigs:
			return nil
		case <-tick.C:
		}
	}
}
