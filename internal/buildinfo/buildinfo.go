// Package buildinfo holds the version stamped in by the linker:
// -ldflags "-X github.com/mptester/mptester/internal/buildinfo.Version=v1.2.3 ..."
package buildinfo

var (
	Version = "dev"
	Commit  = "none"
	Date    = "unknown"
)
