package lab

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mptester/mptester/lab/emu"
)

func TestPlanMatchesDoc(t *testing.T) {
	w, _ := Plan("wlan0")
	c, _ := Plan("wwan0")
	if w.Client4.String() != "198.18.1.2" || w.Gateway6.String() != "fd00:1::1" || w.Resolv4.String() != "198.18.100.1" ||
		c.Client6.String() != "fd00:2::2" || c.Resolv6.String() != "fd00:100::2" || w.Metric >= c.Metric {
		t.Errorf("address plan differs from doc.go: %+v %+v", w, c)
	}
	if _, ok := Plan("eth0"); ok {
		t.Error("Plan(eth0) exists")
	}
}

func TestNames(t *testing.T) {
	for _, n := range []string{"default", "a", "t123-abc", "x2345678901234567890123a"} {
		if err := ValidName(n); err != nil {
			t.Errorf("ValidName(%q): %v", n, err)
		}
		for i := range PathNames {
			for _, side := range []byte{'c', 'i'} {
				if d := tmpTUN(n, i, side); len(d) > 15 {
					t.Errorf("tmpTUN(%q) = %q longer than IFNAMSIZ-1", n, d)
				}
			}
		}
	}
	for _, n := range []string{"", "Bad", "a b", "-x", "a/b", strings.Repeat("a", 25), "../etc"} {
		if ValidName(n) == nil {
			t.Errorf("ValidName(%q) accepted", n)
		}
	}
	if tmpTUN("a", 0, 'c') == tmpTUN("b", 0, 'c') || tmpTUN("a", 0, 'c') == tmpTUN("a", 1, 'c') {
		t.Error("tmpTUN names collide")
	}
}

// fakeLab records what the control socket asks (a fake for the protocol
// only; the real lab is exercised by the lab tests).
type fakeLab struct{ sets []string }

func (f *fakeLab) Set(path string, c emu.Change) error {
	if _, ok := Plan(path); !ok {
		return ErrNoSuchPath
	}
	f.sets = append(f.sets, path+" "+c.String())
	return nil
}
func (f *fakeLab) Status() Status { return Status{Info: Info{Name: "fake"}} }

func TestControlSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "c.sock")
	f := &fakeLab{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := ListenControl(sock)
	if err != nil {
		t.Fatal(err)
	}
	downed := make(chan struct{})
	go ServeControlOn(ctx, ln, f, func() { close(downed) })
	r, err := Control(ctx, sock, Request{Op: "status"})
	if err != nil || r.Status == nil || r.Status.Info.Name != "fake" {
		t.Fatalf("status: %+v %v", r, err)
	}
	if _, err := Control(ctx, sock, Request{Op: "set", Path: "wlan0", Args: []string{"delay=20ms"}}); err != nil || len(f.sets) != 1 || !strings.Contains(f.sets[0], "delay=20ms") {
		t.Fatalf("set: %v %v", f.sets, err)
	}
	for _, bad := range []Request{{Op: "set", Path: "wlan0", Args: []string{"delay=oops"}}, {Op: "set", Path: "eth9", Args: []string{"down"}}, {Op: "reboot"}} {
		if _, err := Control(ctx, sock, bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if _, err := Control(ctx, sock, Request{Op: "down"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-downed:
	case <-time.After(2 * time.Second):
		t.Fatal("down callback not called")
	}
	cancel()
	time.Sleep(50 * time.Millisecond)
	if _, err := Control(context.Background(), sock, Request{Op: "status"}); !errors.Is(err, ErrNotRunning) {
		t.Errorf("after shutdown: %v, want ErrNotRunning", err)
	}
}

// FuzzControlRequest: whatever arrives on the control socket gives an
// error response, never a panic.
func FuzzControlRequest(f *testing.F) {
	for _, s := range []string{`{"op":"status"}`, `{"op":"set","path":"wlan0","args":["delay=1ms","loss=5%"]}`,
		`{"op":"set","path":"wwan0","args":["down"]}`, `{"op":"down"}`, `{"op":"set","args":[""]}`, `[]`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req Request
		if json.Unmarshal(b, &req) != nil {
			return
		}
		r := handle(&fakeLab{}, req)
		if !r.OK && r.Error == "" {
			t.Errorf("%q: failure without a message", b)
		}
	})
}

func TestScenariosParse(t *testing.T) {
	for _, sc := range Scenarios() {
		got, ev, err := GetScenario(sc.Name)
		if err != nil || got.Name != sc.Name || len(ev) == 0 || ev[0].At != ScenarioStart || ev[0].Path != "wlan0" {
			t.Errorf("%s: %v %+v", sc.Name, err, ev)
		}
	}
	if _, _, err := GetScenario("nope"); !errors.Is(err, ErrNoSuchScenario) {
		t.Errorf("unknown scenario: %v", err)
	}
}
