package survey

// countHostLoss tells the health monitor about a finished resolution's
// queries the host may have lost. The resolver gives such a query one
// more attempt for each attempt that timed out after the host dropped
// packets or stalled while its answer was due (probe.ResolverOptions
// .HostLost), so a TIMEOUT stays (retries+1) attempts the server did not
// answer; one that had to count such an attempt (no more could be added)
// is suspect: the run ends partial and says how many.
func (r *runner) countHostLoss(rec ResolutionRecord) {
	retries, suspect := 0, false
	for _, q := range rec.Queries {
		retries += q.HostRetries
		suspect = suspect || (q.Status == StatusTimeout && q.HostSuspect)
	}
	r.health.countDNS(retries, suspect)
}
