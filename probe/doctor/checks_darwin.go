//go:build darwin

package doctor

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/mptester/mptester/probe/nw"
)

// On macOS: privileges, per-path DNS and what Network.framework needs.
func runOS(_ context.Context, env *Env) []Check {
	out := append([]Check{privileges(env)}, dnsChecks(outwardPaths(env.Paths))...)
	var f macOSFacts
	f.Version, f.VersionErr = unix.Sysctl("kern.osproductversion")
	api, err := nw.System()
	f.Framework = err
	if err == nil {
		f.Listed = func(name string) error {
			i, err := api.FindInterface(name)
			if err != nil {
				return err
			}
			api.Release(i)
			return nil
		}
	}
	return append(out, macOSChecks(f, env.Paths)...)
}
