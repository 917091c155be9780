//go:build !linux

package main

// keepHeapOnHugePages does nothing here: only Linux's transparent huge pages are asked for.
func keepHeapOnHugePages(stop <-chan struct{}) {}
