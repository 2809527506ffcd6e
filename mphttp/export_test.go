package mphttp

// SetTrace logs the scheduler's decisions to f (nil: off).
func SetTrace(f func(string, ...any)) {
	if f == nil {
		f = func(string, ...any) {}
	}
	tracef = f
}
