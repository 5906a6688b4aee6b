package realnode

import (
	"net"
	"testing"
	"time"
)

// TestNetworkIsolated: inside the suite's namespace there is no route out, so a connection
// to an address outside it (192.0.2.1, TEST-NET-1, RFC 5737) fails at once without a packet
// leaving, and only the interfaces the suite made exist.
func TestNetworkIsolated(t *testing.T) {
	c, err := net.DialTimeout("tcp", "192.0.2.1:80", 2*time.Second)
	if err == nil {
		c.Close()
		t.Fatal("a connection to 192.0.2.1 left the namespace")
	}
	t.Logf("192.0.2.1: %v", err)
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Name != "lo" && !isSuiteInterface(i.Name) {
			t.Errorf("interface %s in the namespace: not the suite's", i.Name)
		}
	}
}
