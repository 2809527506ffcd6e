package spill

import "os"

// UnlinkedTemp creates a temporary file and removes its name at once, so
// it goes with the process whatever happens (where an open file cannot be
// removed, as on Windows, closing it leaves it for the OS's cleaning).
func UnlinkedTemp(pattern string) (*os.File, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	return f, nil
}

// CloseTemp closes an UnlinkedTemp file and removes it where that failed.
func CloseTemp(f *os.File) error {
	err := f.Close()
	os.Remove(f.Name())
	return err
}
