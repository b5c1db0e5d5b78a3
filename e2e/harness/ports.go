package harness

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// The ports FreePort hands out lie below the kernel's ephemeral range, from firstPort up.
// A port taken from the ephemeral range (listening on port 0) is free only until the process
// binds it, seconds later for kube-controller-manager (after etcd and kube-apiserver are up); in
// between, any outgoing connection of the host (kube-apiserver's to etcd, the tests' clients) may
// be given it as its local port, and the server then exits with "address already in use". Ports
// below the ephemeral range are never given to outgoing connections.
const firstPort = 10000

var (
	portsMu sync.Mutex
	// handedOut keeps FreePort from giving one port twice in a test process.
	handedOut = map[int]bool{}
)

// FreePort returns a loopback TCP port that was free a moment ago, outside the kernel's
// ephemeral range where it knows that range (Linux), and not returned before by this process.
func FreePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	if lo, ok := ephemeralLow(); ok && lo-firstPort >= 1000 {
		for range 200 {
			port := firstPort + rand.IntN(lo-firstPort)
			if handedOut[port] || !free(port) {
				continue
			}
			handedOut[port] = true
			return port, nil
		}
	}
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut[port] {
			handedOut[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free loopback port after 220 tries")
}

// free reports whether port can be listened on at 127.0.0.1 now.
func free(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux), if it can be read.
func ephemeralLow() (int, bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, false
	}
	return parsePortRange(string(b))
}

// parsePortRange reads ip_local_port_range's "low<tab>high" and returns low.
func parsePortRange(s string) (int, bool) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, false
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= 0 || lo > 65535 {
		return 0, false
	}
	return lo, true
}
