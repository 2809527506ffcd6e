package probe

// WatchChanges (watch_linux.go, watch_other.go) tells a caller when to
// re-discover the paths.
//
// Design: the channel only says "something about links, addresses or
// routes changed at this time"; the caller re-runs Discover and compares
// with what it had. Messages are not parsed: Discover is the one source of
// truth for what a Path is, and no decoder means no decoder bugs. Where the
// OS has no notifications WatchChanges returns ErrUnsupported instead of a
// fake ticker, because every caller keeps a safety ticker anyway
// (notifications can be lost when the kernel's socket buffer overflows):
// with a nil channel the caller's select simply degrades to polling.
