// Package nstest gives tests their own Linux network namespace and a way to
// run (part of) a test inside it.
//
// Go cannot reliably move one goroutine into another namespace: the runtime
// spawns threads at will, and a thread created after setns may or may not
// inherit it. So the test re-executes its own binary under
// `ip netns exec NS`, running just itself, and the child checks the
// namespace from the inside:
//
//	func TestThing(t *testing.T) {
//		ns := nstest.New(t)            // child: attaches, creates nothing
//		gw := nstest.New(t)
//		ns.Veth("wlan0", gw, "gw0")    // child: no-op
//		ns.IP("addr", "add", "198.18.1.2/24", "dev", "wlan0")
//		if nstest.InNS(t, ns) {
//			// runs inside the namespace; assert as usual
//			return
//		}
//		// parent: InNS already failed the test if the child failed
//	}
//
// Everything before InNS runs again in the child, so the setup methods of NS
// (IP, Run, Veth) do nothing there; guard other parent-only code with
// IsChild. A test may call InNS several times (for example before and after
// changing the namespace): the n-th call runs the n-th child and only that
// call returns true in it.
package nstest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment of a child: which test, which namespace, which InNS call.
const (
	envTest = "MPTESTER_NSTEST_TEST"
	envNS   = "MPTESTER_NSTEST_NS"
	envStep = "MPTESTER_NSTEST_STEP"
)

// NS is a network namespace owned by one test.
type NS struct {
	Name  string
	t     testing.TB
	child bool
}

var (
	mu    sync.Mutex
	steps = map[string]int{} // InNS calls so far, per test
	// created lists the namespaces each test made, in order; childNews
	// counts New calls in the child so each NS gets the name the parent
	// gave it.
	created   = map[string][]string{}
	childNews = map[string]int{}
)

// IsChild reports whether this process is a re-executed child running
// inside a namespace.
func IsChild() bool { return os.Getenv(envTest) != "" }

// RequireRoot skips the test unless it runs as root with iproute2 present;
// under CI=true it fails instead, so CI never silently skips.
func RequireRoot(t testing.TB) {
	t.Helper()
	reason := ""
	if os.Geteuid() != 0 {
		reason = "needs root to create network namespaces"
	} else if _, err := exec.LookPath("ip"); err != nil {
		reason = "needs iproute2 (ip) to create network namespaces"
	}
	SkipUnless(t, reason)
}

// SkipUnless skips the test for reason (non-empty) — except under CI=true,
// where a missing prerequisite is a failure: CI never silently skips.
func SkipUnless(t testing.TB, reason string) {
	t.Helper()
	if reason == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: not skipping)", reason)
	}
	t.Skip(reason)
}

// New creates a uniquely named namespace with loopback up and deletes it
// when the test ends. In a child it creates nothing: it returns the
// namespace the parent created.
func New(t testing.TB) *NS {
	t.Helper()
	if IsChild() && os.Getenv(envTest) == t.Name() {
		mu.Lock()
		childNews[t.Name()]++
		n := childNews[t.Name()]
		mu.Unlock()
		names := strings.Split(os.Getenv(envNS), ",")
		name := ""
		if n <= len(names) {
			name = names[n-1]
		}
		return &NS{Name: name, t: t, child: true}
	}
	RequireRoot(t)
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("nstest: random name: %v", err)
	}
	ns := &NS{Name: fmt.Sprintf("mpt%d-%s", os.Getpid(), hex.EncodeToString(b[:])), t: t}
	if out, err := exec.Command("ip", "netns", "add", ns.Name).CombinedOutput(); err != nil {
		t.Fatalf("nstest: ip netns add %s: %v: %s", ns.Name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns.Name).CombinedOutput(); err != nil {
			t.Errorf("nstest: ip netns del %s: %v: %s", ns.Name, err, out)
		}
	})
	mu.Lock()
	if len(created[t.Name()]) == 0 {
		// A test run again (-count=N) starts afresh, or its children
		// would match no step and pass having run nothing.
		t.Cleanup(func() {
			mu.Lock()
			delete(created, t.Name())
			delete(steps, t.Name())
			mu.Unlock()
		})
	}
	created[t.Name()] = append(created[t.Name()], ns.Name)
	mu.Unlock()
	ns.IP("link", "set", "lo", "up")
	return ns
}

// IP runs `ip -n NAME args...` and returns its output; failure fails the
// test. A no-op in the child.
func (ns *NS) IP(args ...string) string {
	ns.t.Helper()
	if ns.child {
		return ""
	}
	return ns.run("ip", append([]string{"-n", ns.Name}, args...)...)
}

// Run runs a command inside the namespace (`ip netns exec NAME args...`)
// and returns its combined output; failure fails the test. A no-op in the
// child, which is already inside.
func (ns *NS) Run(args ...string) string {
	ns.t.Helper()
	if ns.child {
		return ""
	}
	return ns.run("ip", append([]string{"netns", "exec", ns.Name}, args...)...)
}

// Veth creates a veth pair, name in ns and peerName in peer, both up.
// A no-op in the child.
func (ns *NS) Veth(name string, peer *NS, peerName string) {
	ns.t.Helper()
	if ns.child {
		return
	}
	ns.IP("link", "add", name, "type", "veth", "peer", "name", peerName, "netns", peer.Name)
	ns.IP("link", "set", name, "up")
	peer.IP("link", "set", peerName, "up")
}

func (ns *NS) run(name string, args ...string) string {
	ns.t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		ns.t.Fatalf("nstest: %s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// InNS re-executes the current test inside ns. In the parent it waits for
// the child, fails the test if the child failed or did not run, and returns
// false. In the child it returns true for the call that started it.
func InNS(t *testing.T, ns *NS) bool {
	t.Helper()
	mu.Lock()
	steps[t.Name()]++
	step := steps[t.Name()]
	names := strings.Join(created[t.Name()], ",")
	mu.Unlock()

	if IsChild() && os.Getenv(envTest) == t.Name() {
		return os.Getenv(envStep) == strconv.Itoa(step)
	}
	RunChild(t, ns.Name, envTest+"="+t.Name(), envNS+"="+names, envStep+"="+strconv.Itoa(step))
	return false
}

// RunChild re-executes the current test (only it) inside network namespace
// nsName with the extra environment env, and fails t unless the child ran
// and passed: a child that skipped or matched nothing proves nothing. The
// child inherits what is left of the test's deadline. Both InNS and
// lab/labtest's InClient are built on it.
func RunChild(t testing.TB, nsName string, env ...string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("nstest: find test binary: %v", err)
	}
	args := []string{"netns", "exec", nsName, exe, "-test.run", runPattern(t.Name()), "-test.v", "-test.count=1"}
	if tt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := tt.Deadline(); ok {
			args = append(args, "-test.timeout", time.Until(d).Round(time.Second).String())
		}
	}
	cmd := exec.Command("ip", args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()+" ") {
		t.Fatalf("nstest: child of %s in netns %s failed (err=%v):\n%s", t.Name(), nsName, err, out)
	}
	if testing.Verbose() {
		t.Logf("nstest: child in netns %s:\n%s", nsName, out)
	}
}

// runPattern matches exactly the test (and subtest) named name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}
