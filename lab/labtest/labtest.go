// Package labtest runs a lab inside a Go test.
//
// Start builds a lab in the test process (no daemon) and tears it down in
// t.Cleanup. It skips the test with the reason when not root or when
// /dev/net/tun is missing, except under CI=true, where it fails instead.
//
// Code that must run on the client side (sockets through wlan0/wwan0) runs
// in a re-executed copy of the test binary living entirely in the client
// namespace: Go cannot move one goroutine into a namespace, because the
// runtime starts threads at will. A lab test looks like this:
//
//	func TestSomething(t *testing.T) {
//		l := labtest.Start(t, lab.Options{Domains: 50}) // child: attaches to the parent's lab
//		l.Set(t, "wlan0", "delay=25ms")                 // parent and child alike (control socket)
//		if l.InClient(t) {
//			// Child, inside the client namespace: wlan0 and wwan0 exist.
//			paths := l.Paths(t) // probe.Discover with the lab's per-path DNS
//			wlan, _ := probe.FindPath(paths, "wlan0")
//			c, err := probe.DialContext(ctx, wlan, "tcp", "198.19.0.1:443")
//			...                                     // assert as usual
//			return
//		}
//		// Parent: InClient already failed the test if the child failed.
//	}
//
// Everything before InClient runs again in the child; Start does not build
// a second lab there but returns the parent's (Config, Set, Status work;
// the parent's *lab.Lab is nil). Guard parent-only code with IsChild. A
// test may call InClient several times: the n-th call runs the n-th child.
// Subtests work (the child runs exactly that subtest).
//
// Code that only needs a command in the client namespace uses l.Exec or
// l.Command instead of a child. Server-side sockets can be opened from the
// parent with l.Lab.ListenTCP / ListenUDP.
//
// Lab tests build and tear down namespaces and use timing: run them as
// their own CI step, one package at a time:
//
//	CI=true go test -p 1 -count=1 ./lab/... ./survey/... -run Lab
package labtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/nstest"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/probe"
)

// Environment of a re-executed child.
const (
	envTest = "MPTESTER_LABTEST_TEST"
	envDir  = "MPTESTER_LABTEST_DIR"
	envStep = "MPTESTER_LABTEST_STEP"
)

// Lab is a lab seen from a test.
type Lab struct {
	// Lab is the running lab (nil in a child).
	Lab  *lab.Lab
	info lab.Info
}

var (
	mu    sync.Mutex
	steps = map[string]int{}
)

// IsChild reports whether this process is a re-executed child in a lab's
// client namespace.
func IsChild() bool { return os.Getenv(envTest) != "" }

func isMyChild(t testing.TB) bool { return os.Getenv(envTest) == t.Name() }

// Require skips the test unless labs can run here (root, /dev/net/tun,
// iproute2); under CI=true it fails instead.
func Require(t testing.TB) {
	t.Helper()
	reason := ""
	switch {
	case os.Geteuid() != 0:
		reason = "lab tests need root (network namespaces, TUN devices)"
	default:
		if _, err := os.Stat("/dev/net/tun"); err != nil {
			reason = "lab tests need /dev/net/tun: " + err.Error()
		} else if _, err := exec.LookPath("ip"); err != nil {
			reason = "lab tests need iproute2 (ip)"
		}
	}
	nstest.SkipUnless(t, reason)
}

// Start brings a lab up for this test, uniquely named, in a temporary
// directory, torn down at cleanup (the cleanup fails the test if anything
// is left behind). In a child it returns the parent's lab.
func Start(t testing.TB, opts lab.Options) *Lab {
	t.Helper()
	if isMyChild(t) {
		info, err := lab.ReadInfo(os.Getenv(envDir))
		if err != nil {
			t.Fatalf("labtest: child: %v", err)
		}
		return &Lab{info: info}
	}
	Require(t)
	if opts.Name == "" {
		var b [3]byte
		_, _ = rand.Read(b[:])
		opts.Name = fmt.Sprintf("t%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
	}
	if opts.Dir == "" {
		// Short: the control socket's path must fit in 108 bytes.
		dir, err := os.MkdirTemp("", "mptlab")
		if err != nil {
			t.Fatalf("labtest: %v", err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		opts.Dir = dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := lab.Up(ctx, opts)
	if err != nil {
		t.Fatalf("labtest: lab up: %v", err)
	}
	ln, err := lab.ListenControl(l.Info().Files.Control)
	if err != nil {
		l.Close()
		t.Fatalf("labtest: %v", err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := lab.ServeControlOn(sctx, ln, l, nil); err != nil {
			t.Logf("labtest: control socket: %v", err)
		}
	}()
	t.Cleanup(func() {
		stop()
		<-done
		if err := l.Close(); err != nil {
			t.Errorf("labtest: lab down: %v", err)
		}
		if left := lab.Leftovers(opts.Name, opts.Dir); len(left) > 0 {
			t.Errorf("labtest: lab %s left %v", opts.Name, left)
		}
	})
	return &Lab{Lab: l, info: l.Info()}
}

// Config returns lab.json: namespaces, addresses, resolvers, servers and
// the paths of tranco.csv, truth.json, world.json and config.yaml.
func (l *Lab) Config() lab.Info { return l.info }

// Set changes path ("wlan0", "wwan0") like `lab set`, e.g.
// l.Set(t, "wlan0", "delay=25ms", "loss=1%") or l.Set(t, "wlan0", "down").
func (l *Lab) Set(t testing.TB, path string, settings ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := lab.Control(ctx, l.info.Files.Control, lab.Request{Op: "set", Path: path, Args: settings}); err != nil {
		t.Fatalf("labtest: set %s %v: %v", path, settings, err)
	}
}

// Scenario starts the named lab scenario (lab.Scenarios) now; its truth
// is in Status().Timeline.
func (l *Lab) Scenario(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := lab.Control(ctx, l.info.Files.Control, lab.Request{Op: "scenario", Args: []string{name}}); err != nil {
		t.Fatalf("labtest: scenario %s: %v", name, err)
	}
}

// ScenarioWhen starts the named scenario from a goroutine as soon as the
// lab's status satisfies ready (polled every 10 ms), so a scenario's phases
// follow a measured event (traffic seen on a path) rather than the moment
// the test happened to start it. The returned wait reports, on the test's
// goroutine, when it started, and fails the test if it never did before
// ctx ended or the lab refused.
func (l *Lab) ScenarioWhen(ctx context.Context, name string, ready func(lab.Status) bool) (wait func(t testing.TB) time.Time) {
	type result struct {
		at  time.Time
		err error
	}
	done := make(chan result, 1)
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			resp, err := lab.Control(ctx, l.info.Files.Control, lab.Request{Op: "status"})
			if err != nil {
				done <- result{err: fmt.Errorf("status: %w", err)}
				return
			}
			if ready(*resp.Status) {
				at := time.Now()
				if _, err := lab.Control(ctx, l.info.Files.Control, lab.Request{Op: "scenario", Args: []string{name}}); err != nil {
					done <- result{err: err}
					return
				}
				done <- result{at: at}
				return
			}
			select {
			case <-ctx.Done():
				done <- result{err: fmt.Errorf("never ready: %w", ctx.Err())}
				return
			case <-tick.C:
			}
		}
	}()
	return func(t testing.TB) time.Time {
		t.Helper()
		r := <-done
		if r.err != nil {
			t.Fatalf("labtest: scenario %s: %v", name, r.err)
		}
		return r.at
	}
}

// Status returns the live parameters and counters of the paths.
func (l *Lab) Status(t testing.TB) lab.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := lab.Control(ctx, l.info.Files.Control, lab.Request{Op: "status"})
	if err != nil {
		t.Fatalf("labtest: status: %v", err)
	}
	return *resp.Status
}

// Command prepares a command in a namespace of the lab ("client" or
// "server"), with MPTESTER_CONFIG set.
func (l *Lab) Command(ctx context.Context, side string, argv ...string) (*exec.Cmd, error) {
	return lab.Command(ctx, l.info, side, argv...)
}

// Exec runs a command in a namespace of the lab and returns its combined
// output.
func (l *Lab) Exec(ctx context.Context, side string, argv ...string) ([]byte, error) {
	cmd, err := l.Command(ctx, side, argv...)
	if err != nil {
		return nil, err
	}
	return cmd.CombinedOutput()
}

// Paths discovers the client's paths with the lab's per-path DNS servers
// (the dns section of its config.yaml, as `mptester --config config.yaml`
// would). Call it in the child.
func (l *Lab) Paths(t testing.TB) []probe.Path {
	t.Helper()
	dns, err := probe.ParseDNSConfig(l.info.DNS())
	if err != nil {
		t.Fatalf("labtest: lab config dns: %v", err)
	}
	paths, err := probe.Discover(context.Background(), probe.DiscoverOptions{ConfigDNS: dns})
	if err != nil {
		t.Fatalf("labtest: discover: %v", err)
	}
	return paths
}

// Path returns the client path name (call it in the child).
func (l *Lab) Path(t testing.TB, name string) probe.Path {
	t.Helper()
	p, err := probe.FindPath(l.Paths(t), name)
	if err != nil {
		t.Fatalf("labtest: %v", err)
	}
	return p
}

// InClient re-executes the current test inside the lab's client
// namespace. In the parent it waits for the child, fails the test if the
// child failed, skipped or did not run, and returns false. In the child it
// returns true for the call that started it.
func (l *Lab) InClient(t *testing.T) bool {
	t.Helper()
	mu.Lock()
	if steps[t.Name()] == 0 && !isMyChild(t) {
		// A test run again (-count=N) starts its steps afresh, or its
		// children would match no step and pass having run nothing.
		t.Cleanup(func() {
			mu.Lock()
			delete(steps, t.Name())
			mu.Unlock()
		})
	}
	steps[t.Name()]++
	step := steps[t.Name()]
	mu.Unlock()
	if isMyChild(t) {
		return os.Getenv(envStep) == strconv.Itoa(step)
	}
	nstest.RunChild(t, l.info.Namespaces.Client, envTest+"="+t.Name(), envDir+"="+l.info.Dir, envStep+"="+strconv.Itoa(step))
	return false
}

// Truth decodes truth.json into v (the world's ground truth).
func (l *Lab) Truth(t testing.TB, v any) {
	t.Helper()
	b, err := os.ReadFile(l.info.Files.Truth)
	if err != nil {
		t.Fatalf("labtest: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("labtest: %s: %v", l.info.Files.Truth, err)
	}
}
