package transport

import (
	"fmt"
	"testing"
	"time"

	"github.com/mptester/mptester/mpquic"
)

// mpquic's errors each mean one status, wrapped or not.
func TestMPQUICStatus(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Status
	}{
		{mpquic.ErrHandshakeTimeout, StatusConnectionTimeout},
		{mpquic.ErrIdleTimeout, StatusTimeout},
		{mpquic.ErrVersionNegotiation, StatusUnsupported},
		{mpquic.ErrStatelessReset, StatusConnectionReset},
		{fmt.Errorf("read: %w", mpquic.ErrStatelessReset), StatusConnectionReset},
		{&mpquic.ApplicationCloseError{Remote: true, Code: 1}, StatusConnectionClosed},
	} {
		if got := mpquicStatus(c.err); got != c.want {
			t.Errorf("%v: %q, want %q", c.err, got, c.want)
		}
	}
}

// --mpquic-cc reaches mpquic's configuration on both sides (the dial's and
// the listener's use mpquicConfig).
func TestMPQUICCongestionOption(t *testing.T) {
	for _, cc := range append(mpquic.CongestionControls(), "") {
		if got := mpquicConfig(time.Second, "", cc).Congestion; got != cc {
			t.Errorf("congestion %q configured as %q", cc, got)
		}
	}
}
