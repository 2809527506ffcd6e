//go:build !linux

package emu

import "runtime"

func newWaiter() waiter { return newChanWaiter() }

func lockThread() { runtime.LockOSThread() }
