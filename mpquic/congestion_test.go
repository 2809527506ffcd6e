package mpquic

import (
	"context"
	"testing"
	"time"

	"github.com/mptester/mptester/mpquic/internal/congestion"
)

func TestCongestionConfig(t *testing.T) {
	if _, err := (&Config{Congestion: "bbr"}).withDefaults(); err == nil {
		t.Fatal("unknown congestion control accepted")
	}
	conf, err := (&Config{}).withDefaults()
	if err != nil || conf.Congestion != CongestionCUBIC {
		t.Fatalf("default %q, %v", conf.Congestion, err)
	}
}

// Each controller carries a two-path transfer; the paths' controllers are
// the one configured.
func TestCongestionControllersTwoPaths(t *testing.T) {
	for _, cc := range CongestionControls() {
		t.Run(string(cc), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			conf := &Config{Congestion: cc}
			mp := newMPPair(t, ctx, udpLoopback(t), conf, conf)
			if _, err := mp.c.AddPath(ctx, udpLoopback(t), mp.l.Addr()); err != nil {
				t.Fatal(err)
			}
			exchange(t, ctx, mp.open, testData(2<<20, 5))
			srv := mp.server(t)
			srv.mu.Lock()
			defer srv.mu.Unlock()
			for _, id := range srv.pathIDs() {
				var ok bool
				switch srv.paths[id].cc.Controller().(type) {
				case *congestion.Cubic:
					ok = cc == CongestionCUBIC
				case *congestion.NewReno:
					ok = cc == CongestionNewReno
				case *congestion.LIA:
					ok = cc == CongestionLIA
				}
				if !ok {
					t.Errorf("path %d: %T, want %s", id, srv.paths[id].cc.Controller(), cc)
				}
			}
		})
	}
}
