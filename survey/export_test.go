package survey

import "github.com/mptester/mptester/survey/internal/rawprobe"

// SetOverloadHooks slows every probe socket's receive loop on purpose (rx
// runs before each packet is handled) and shrinks its receive buffer to
// rcvBuf bytes (0: the default), until restore is called.
func SetOverloadHooks(rx func(), rcvBuf int) (restore func()) {
	return rawprobe.SetOverloadHooks(rx, rcvBuf)
}
