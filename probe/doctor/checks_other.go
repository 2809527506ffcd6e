//go:build !linux && !darwin

package doctor

import "context"

// Off Linux there is no MPTCP path manager, rp_filter or policy-routing
// state to check: only privileges and per-path DNS.
func runOS(_ context.Context, env *Env) []Check {
	return append([]Check{privileges(env)}, dnsChecks(outwardPaths(env.Paths))...)
}
