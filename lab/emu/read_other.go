//go:build !linux

package emu

func (d *direction) readRaw() (ok bool, err error) { return false, nil }
