package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestReadAudit: a request is counted once whatever its stages, only within the window; the
// manager's by verb and resource, non-resource requests by path; pod writes that called a
// mutating webhook by writer, once however many webhooks it called.
func TestReadAudit(t *testing.T) {
	const mgr = "system:serviceaccount:npp-system:npp-manager"
	log := `{"auditID":"1","stage":"ResponseComplete","verb":"get","requestURI":"/api/v1/namespaces/a/services/s","user":{"username":"` + mgr + `"},"objectRef":{"resource":"services"},"requestReceivedTimestamp":"2026-12-07T10:00:01Z"}
{"auditID":"2","stage":"ResponseStarted","verb":"watch","requestURI":"/api/v1/pods?watch=1","user":{"username":"` + mgr + `"},"objectRef":{"resource":"pods"},"requestReceivedTimestamp":"2026-12-07T10:00:02Z"}
{"auditID":"2","stage":"ResponseComplete","verb":"watch","requestURI":"/api/v1/pods?watch=1","user":{"username":"` + mgr + `"},"objectRef":{"resource":"pods"},"requestReceivedTimestamp":"2026-12-07T10:00:02Z"}
{"auditID":"3","stage":"ResponseComplete","verb":"patch","requestURI":"/api/v1/namespaces/a/pods/p","user":{"username":"` + mgr + `"},"objectRef":{"resource":"pods"},"requestReceivedTimestamp":"2026-12-07T10:00:03Z","annotations":{"mutation.webhook.admission.k8s.io/round_0_index_0":"{}"}}
{"auditID":"4","stage":"ResponseComplete","verb":"create","requestURI":"/api/v1/namespaces/a/pods","user":{"username":"admin"},"objectRef":{"resource":"pods"},"requestReceivedTimestamp":"2026-12-07T10:00:04Z","annotations":{"mutation.webhook.admission.k8s.io/round_0_index_0":"{}","mutation.webhook.admission.k8s.io/round_0_index_1":"{}"}}
{"auditID":"5","stage":"ResponseComplete","verb":"patch","requestURI":"/api/v1/namespaces/a/pods/p/status","user":{"username":"admin"},"objectRef":{"resource":"pods","subresource":"status"},"requestReceivedTimestamp":"2026-12-07T10:00:05Z"}
{"auditID":"6","stage":"ResponseComplete","verb":"get","requestURI":"/readyz?verbose","user":{"username":"` + mgr + `"},"requestReceivedTimestamp":"2026-12-07T10:00:06Z"}
{"auditID":"7","stage":"ResponseComplete","verb":"get","requestURI":"/api/v1/namespaces/a/services/s","user":{"username":"` + mgr + `"},"objectRef":{"resource":"services"},"requestReceivedTimestamp":"2026-12-07T10:00:09Z"}
`
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	at := func(s int) time.Time { return time.Date(2026, 12, 7, 10, 0, s, 0, time.UTC) }
	got, err := readAudit(path, mgr, at(1), at(9))
	if err != nil {
		t.Fatal(err)
	}
	want := auditCounts{
		manager:   map[string]int{"get services": 1, "watch pods": 1, "patch pods": 1, "get /readyz": 1},
		admission: map[string]int{"patch pods by manager": 1, "create pods by admin": 1},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(auditCounts{})); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	// The last line may be half written: left out. Any other line that is not an event is
	// an error.
	if err := os.WriteFile(path, []byte(log+`{"auditID":"8","sta`), 0o644); err != nil {
		t.Fatal(err)
	}
	if again, err := readAudit(path, mgr, at(1), at(9)); err != nil || !cmp.Equal(want, again, cmp.AllowUnexported(auditCounts{})) {
		t.Errorf("a half-written last line: %v, error %v", again, err)
	}
	if err := os.WriteFile(path, []byte("not json\n"+log), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readAudit(path, mgr, at(1), at(9)); err == nil {
		t.Error("a line that is not an event was accepted")
	}
}
