package probe

import "errors"

var (
	// ErrNoSuchPath: the named interface does not exist.
	ErrNoSuchPath = errors.New("no such interface")
	// ErrNoSourceAddr: the path has no usable address of the wanted family.
	ErrNoSourceAddr = errors.New("path has no address of that family")
	// ErrUnsupported: the OS cannot do this (e.g. MPTCP off Linux).
	ErrUnsupported = errors.New("not supported on this OS")
)
