package emu

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseChange(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	cases := []struct {
		args    []string
		up, dn  Params // applied to zero Params
		down    *bool
		wantErr string
	}{
		{args: []string{"delay=200ms", "loss=30%"}, up: Params{Delay: ms(200), Loss: 0.3}, dn: Params{Delay: ms(200), Loss: 0.3}},
		{args: []string{"delay=200ms loss=0.3"}, up: Params{Delay: ms(200), Loss: 0.3}, dn: Params{Delay: ms(200), Loss: 0.3}},
		{args: []string{"up.delay=5ms", "down.delay=7ms", "jitter=1ms"}, up: Params{Delay: ms(5), Jitter: ms(1)}, dn: Params{Delay: ms(7), Jitter: ms(1)}},
		{args: []string{"rate=10mbit", "queue=64kb"}, up: Params{RateBps: 10e6, QueueBytes: 65536}, dn: Params{RateBps: 10e6, QueueBytes: 65536}},
		{args: []string{"up.rate=1.5Mbit", "down.rate=100kbit", "up.queue=1500", "down.queue=1mb"}, up: Params{RateBps: 1.5e6, QueueBytes: 1500}, dn: Params{RateBps: 100e3, QueueBytes: 1 << 20}},
		{args: []string{"rate=2gbit"}, up: Params{RateBps: 2e9}, dn: Params{RateBps: 2e9}},
		{args: []string{"rate=5000"}, up: Params{RateBps: 5000}, dn: Params{RateBps: 5000}},
		{args: []string{"rate=off", "delay=0", "loss=0"}},
		{args: []string{"ge=1%,25%"}, up: Params{GE: &GilbertElliott{P: 0.01, R: 0.25, LossBad: 1}}, dn: Params{GE: &GilbertElliott{P: 0.01, R: 0.25, LossBad: 1}}},
		{args: []string{"down.ge=0.01,0.3,0,0.8"}, dn: Params{GE: &GilbertElliott{P: 0.01, R: 0.3, LossBad: 0.8}}},
		{args: []string{"down"}, down: ptr(true)},
		{args: []string{"loss=5%", "UP"}, up: Params{Loss: 0.05}, dn: Params{Loss: 0.05}, down: ptr(false)},
		{args: nil},
		{args: []string{"delay=abc"}, wantErr: `"delay=abc"`},
		{args: []string{"delay=-5ms"}, wantErr: "out of range"},
		{args: []string{"loss=130%"}, wantErr: `"loss=130%"`},
		{args: []string{"loss=NaN"}, wantErr: "probability"},
		{args: []string{"rate=10mbps"}, wantErr: "ambiguous"},
		{args: []string{"rate=10"}, wantErr: "below 1kbit"},
		{args: []string{"queue=-1"}, wantErr: "out of range"},
		{args: []string{"ge=1,2,3"}, wantErr: "ge=p,r"},
		{args: []string{"ge=0.1,x"}, wantErr: `value 2 "x"`},
		{args: []string{"speed=1"}, wantErr: `unknown key "speed"`},
		{args: []string{"left.delay=1ms"}, wantErr: `unknown key "left.delay"`},
		{args: []string{"sideways"}, wantErr: `"sideways": want key=value`},
		{args: []string{"delay=5ms", "=", "loss=1%"}, wantErr: `"="`},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, "_"), func(t *testing.T) {
			ch, err := ParseChange(c.args)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			l := NewLink("x", newMemDev(), newMemDev(), 1)
			defer l.Close()
			l.Apply(ch)
			for _, d := range []Direction{Up, Down} {
				want := c.up
				if d == Down {
					want = c.dn
				}
				if got := l.Params(d); !sameParams(got, want) {
					t.Errorf("%v: got %v, want %v", d, got, want)
				}
			}
			if c.down != nil && l.Down() != *c.down {
				t.Errorf("Down() = %v, want %v", l.Down(), *c.down)
			}
			// String renders something ParseChange reads back identically.
			back, err := ParseChange([]string{ch.String()})
			if err != nil || back.String() != ch.String() {
				t.Errorf("round trip %q -> %q, %v", ch.String(), back.String(), err)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func sameParams(a, b Params) bool {
	ga, gb := a.GE, b.GE
	a.GE, b.GE = nil, nil
	if a != b || (ga == nil) != (gb == nil) {
		return false
	}
	return ga == nil || *ga == *gb
}

func TestApplyKeepsUnsetFields(t *testing.T) {
	l := NewLink("x", newMemDev(), newMemDev(), 1)
	defer l.Close()
	l.Set(Up, Params{Delay: 10 * time.Millisecond, RateBps: 5e6, GE: &GilbertElliott{P: 0.1, R: 0.5, LossBad: 1}})
	ch, err := ParseChange([]string{"up.loss=2%", "ge=off"})
	if err != nil {
		t.Fatal(err)
	}
	l.Apply(ch)
	want := Params{Delay: 10 * time.Millisecond, RateBps: 5e6, Loss: 0.02}
	if got := l.Params(Up); !sameParams(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestParseTimeline(t *testing.T) {
	src := `# handover
t=5s wlan0 loss=5%
t=10s wlan0 loss=30%   # worse
15s wlan0 down

t=0 wwan0 delay=40ms up.rate=2mbit
t=10s wwan0 up
`
	evs, err := ParseTimeline(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	type ev struct {
		at   time.Duration
		path string
		ch   string
	}
	want := []ev{
		{0, "wwan0", "delay=40ms up.rate=2000000bit"},
		{5 * time.Second, "wlan0", "loss=5%"},
		{10 * time.Second, "wlan0", "loss=30%"},
		{10 * time.Second, "wwan0", "up"},
		{15 * time.Second, "wlan0", "down"},
	}
	if len(evs) != len(want) {
		t.Fatalf("got %d events, want %d", len(evs), len(want))
	}
	for i, e := range evs {
		if got := (ev{e.At, e.Path, e.Change.String()}); got != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got, want[i])
		}
	}
	bad := []struct{ src, want string }{
		{"t=5s wlan0\n", "line 1"},
		{"# ok\nt=x wlan0 down\n", `line 2: bad time "t=x"`},
		{"t=-1s wlan0 down\n", "line 1: bad time"},
		{"t=1s wlan0 down\n\nt=2s wlan0 loss=200%\n", `line 3: bad setting "loss=200%"`},
	}
	for _, b := range bad {
		if _, err := ParseTimeline(strings.NewReader(b.src)); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("ParseTimeline(%q) err = %v, want containing %q", b.src, err, b.want)
		}
	}
}

func TestRunTimelineErrors(t *testing.T) {
	a := NewLink("wlan0", newMemDev(), newMemDev(), 1)
	defer a.Close()
	links := map[string]*Link{"wlan0": a}
	evs, _ := ParseTimeline(strings.NewReader("t=1ms wlan0 loss=1%\nt=10ms eth9 down\n"))
	if err := RunTimeline(context.Background(), evs, links); err == nil || !strings.Contains(err.Error(), `unknown path "eth9"`) {
		t.Errorf("err = %v, want unknown path", err)
	}
	if a.Params(Up).Loss != 0 {
		t.Error("an event was applied although the timeline was invalid")
	}
	evs, _ = ParseTimeline(strings.NewReader("t=1ms wlan0 loss=1%\nt=10s wlan0 down\n"))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := RunTimeline(ctx, evs, links); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want deadline exceeded", err)
	}
	if a.Params(Up).Loss != 0.01 || a.Down() {
		t.Error("first event not applied or second applied early")
	}
}

func FuzzParseChange(f *testing.F) {
	for _, s := range []string{"delay=200ms jitter=5ms loss=30% rate=10mbit queue=64kb ge=0.01,0.3,0,1 down up",
		"up.delay=1ms down.rate=1gbit", "ge=off", "loss=1e-3", "queue=1.5mib", "rate=9e99gbit", "=", "up.=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseChange([]string{s})
		if err != nil {
			return
		}
		// A parsed change renders and parses back to itself, and applies.
		back, err := ParseChange([]string{c.String()})
		if err != nil || back.String() != c.String() {
			t.Fatalf("round trip %q -> %q: %v", c.String(), back.String(), err)
		}
		l := NewLink("f", newMemDev(), newMemDev(), 1)
		l.Apply(c)
		l.Close()
	})
}

func FuzzParseTimeline(f *testing.F) {
	f.Add("t=5s wlan0 loss=5%\nt=10s wlan0 loss=30%\n15s wlan0 down # x\n")
	f.Add("t=0 a up\n\n#\nt=1h b delay=1ms")
	f.Add("t=1ns x y=z")
	f.Fuzz(func(t *testing.T, s string) {
		evs, err := ParseTimeline(strings.NewReader(s))
		if err != nil {
			return
		}
		for i, e := range evs {
			if e.At < 0 || e.Path == "" || (i > 0 && evs[i-1].At > e.At) {
				t.Fatalf("bad event %d: %+v", i, e)
			}
		}
	})
}
