package main

import (
	"strings"
	"testing"
	"time"

	"github.com/nexo-temporal/nexo/api"
)

// TestDoctorNotifications: a receiver with a refused or given-up notification is a FAIL
// naming the receiver, the run and the last error; one not yet tried, or none, is ok.
func TestDoctorNotifications(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	if r := notificationResults(nil); len(r) != 1 || r[0].Status != "ok" {
		t.Fatalf("no outbox: %+v, want one ok", r)
	}
	fresh := []api.NotifierStatus{{Receiver: "ops", Pending: []api.NotifyItem{{RunID: "r1", Event: api.EventApprovalRequested, At: at}}, Delivered: 3}}
	if r := notificationResults(fresh); len(r) != 1 || r[0].Status != "ok" || !strings.Contains(r[0].Detail, "3 delivered") {
		t.Fatalf("a notification not yet tried: %+v, want ok", r)
	}
	bad := []api.NotifierStatus{
		{Receiver: "ops", Pending: []api.NotifyItem{{RunID: "r1", Event: api.EventApprovalRequested, At: at, Attempts: 4, LastError: "503 Service Unavailable"}}},
		{Receiver: "chat", Failed: []api.NotifyItem{{RunID: "r2", Event: api.EventApprovalDecided, At: at, Attempts: 9, LastError: "404 Not Found"}}},
		{ID: "nexo-notify:nexo:abc", Error: "deadline exceeded"},
	}
	r := notificationResults(bad)
	if len(r) != 3 {
		t.Fatalf("results %+v, want one FAIL per receiver", r)
	}
	for i, want := range []string{"receiver ops: 1 retrying (oldest: run r1", "receiver chat: 1 given up (last: run r2", "nexo-notify:nexo:abc did not answer"} {
		if r[i].Status != "FAIL" || !strings.Contains(r[i].Detail, want) || r[i].Fix == "" {
			t.Errorf("result %d = %+v, want a FAIL with %q and a fix", i, r[i], want)
		}
	}
	if !strings.Contains(r[0].Detail, "503") || !strings.Contains(r[1].Detail, "404") {
		t.Errorf("the last errors are missing: %+v", r)
	}
}
