package transport

import "github.com/mptester/mptester/probe/nw"

// UseNetworkFramework makes the mptcp transport dial through api (nwfake
// on Linux) until restore is called; tests using it do not run in
// parallel.
func UseNetworkFramework(api nw.API) (restore func()) {
	u, n := useNetworkFramework, networkFramework
	useNetworkFramework, networkFramework = true, func() (nw.API, error) { return api, nil }
	return func() { useNetworkFramework, networkFramework = u, n }
}
