package secrets

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// helperEnv makes the test binary act as a worker holding secretName (see TestMain).
const (
	helperEnv  = "NEXO_SECRETS_TEST_HELPER"
	secretName = "NEXO_SECRETS_TEST_KEY"
	secretVal  = "sk-very-secret-value"
)

// report is what the helper prints.
type report struct {
	PID       int    `json:"pid"`
	Value     string `json:"value"`      // what Env answers for the secret
	InEnv     bool   `json:"in_env"`     // os.LookupEnv still finds it
	Environ   string `json:"environ"`    // /proc/self/environ
	ChildSaw  string `json:"child_saw"`  // a child shell's cat /proc/$PPID/environ
	OtherSeen bool   `json:"other_seen"` // a variable that is no secret survived
}

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "" {
		os.Exit(m.Run())
	}
	e, err := Take([]string{secretName, "", "NEXO_SECRETS_TEST_UNSET"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	r := report{PID: os.Getpid(), Value: e.Getenv(secretName)}
	_, r.InEnv = os.LookupEnv(secretName)
	b, _ := os.ReadFile("/proc/self/environ")
	r.Environ = string(b)
	out, _ := exec.Command("/bin/sh", "-c", `cat /proc/$PPID/environ 2>&1`).Output()
	r.ChildSaw = string(out)
	r.OtherSeen = os.Getenv("NEXO_SECRETS_TEST_PLAIN") == "plain"
	json.NewEncoder(os.Stdout).Encode(r)
	os.Exit(0)
}

// The worker's secret stays readable to the worker (in memory) but is gone from its
// environment, including the initial one /proc/<pid>/environ shows, which a command it
// runs could read. The pid is the same: the program re-executed itself in place.
func TestTakeKeepsSecretsOutOfTheEnvironment(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", secretName+"="+secretVal, "NEXO_SECRETS_TEST_PLAIN=plain")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var r report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("helper said %q: %v", out, err)
	}
	if r.Value != secretVal {
		t.Errorf("Env.Getenv(%s) = %q, want the secret", secretName, r.Value)
	}
	if r.InEnv {
		t.Errorf("os.LookupEnv(%s) still finds the secret", secretName)
	}
	if strings.Contains(r.Environ, secretVal) {
		t.Errorf("/proc/self/environ still holds the secret")
	}
	if !strings.Contains(r.ChildSaw, "NEXO_SECRETS_TEST_PLAIN=plain") && !strings.Contains(r.ChildSaw, "Permission denied") {
		t.Errorf("the child read neither the worker's environment nor a refusal: %q", r.ChildSaw)
	}
	if strings.Contains(r.ChildSaw, secretVal) {
		t.Error("a child reading /proc/$PPID/environ found the secret")
	}
	if !r.OtherSeen {
		t.Error("a variable that is not a secret was lost")
	}
	if r.PID != cmd.Process.Pid {
		t.Errorf("pid %d after Take, want %d (re-executed in place)", r.PID, cmd.Process.Pid)
	}
}
