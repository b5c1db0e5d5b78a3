package harness

import (
	"net"
	"strconv"
	"testing"
)

// FreePort's ports are distinct, bindable, and below the ephemeral range where outgoing
// connections take their local ports (the cause of a kube-controller-manager that exited with
// "address already in use" seconds after the harness picked its port).
func TestFreePortStaysOutOfTheEphemeralRange(t *testing.T) {
	lo, known := ephemeralLow()
	seen := map[int]bool{}
	for range 50 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("FreePort gave %d twice", port)
		}
		seen[port] = true
		if known && lo-firstPort >= 1000 && (port < firstPort || port >= lo) {
			t.Errorf("FreePort gave %d; want one in [%d, %d), below the ephemeral range", port, firstPort, lo)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("FreePort gave %d, which cannot be bound: %v", port, err)
		}
		l.Close()
	}
}

func TestParsePortRange(t *testing.T) {
	for in, want := range map[string]int{"32768\t60999\n": 32768, "1024 65535": 1024, "": 0, "x 1": 0, "70000 80000": 0} {
		got, ok := parsePortRange(in)
		if ok != (want != 0) || got != want {
			t.Errorf("parsePortRange(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
}
