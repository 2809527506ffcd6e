package mpquic

// inQueueLen is how many datagrams wait for a connection's goroutine. A
// client's path readers block on a full queue (its socket buffer then
// fills), so the queue plus the socket buffer must hold the flow control
// window the client granted: everything the server may have in flight can
// then wait here, and a receiver that falls behind slows the sender through
// its ACKs and credit instead of dropping (issue 12: over an unshaped
// second path the client dropped 300-2,000 datagrams a second, which the
// server declared lost). A server's connections share one reader that
// drops on a full queue, so one slow connection cannot stall the others;
// their queue stays at 1024.
func inQueueLen(isClient bool, conf Config) int {
	if !isClient {
		return 1024
	}
	n := int(min(conf.StreamReceiveWindow, conf.ConnectionReceiveWindow) / uint64(conf.MaxDatagramSize-40))
	return min(max(n, 1024), 16384)
}
